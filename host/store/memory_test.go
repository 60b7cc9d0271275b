package store_test

import (
	"testing"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return store.NewMemory() })
}

func BenchmarkMemoryLatestHit(b *testing.B) { storetest.BenchmarkLatestHit(b, store.NewMemory()) }
func BenchmarkMemoryPut(b *testing.B)       { storetest.BenchmarkPut(b, store.NewMemory()) }

func BenchmarkMemorySessionAppend(b *testing.B) {
	storetest.BenchmarkSessionAppend(b, store.NewMemory())
}
func BenchmarkMemorySessionUpdate(b *testing.B) {
	storetest.BenchmarkSessionUpdate(b, store.NewMemory())
}
