package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/compact-host/compact-host/host/store"
	"github.com/stretchr/testify/require"
)

// BenchRecords is how many records a benchmark's store holds, so that a
// store whose cost grows with its size shows it.
const BenchRecords = 1000

// benchRecord is a record of a realistic size: an 8 KiB replacement.
func benchRecord(i int) *store.Record {
	rec := Sample(fmt.Sprintf("bench-key-%d", i), fmt.Sprintf("bench-conv-%d", i%100))
	rec.Replacement = bytes.Repeat([]byte("summary "), 1<<10)
	return rec
}

// Preload fills s with BenchRecords records over 100 conversations.
func Preload(b *testing.B, s store.Store) {
	for i := range BenchRecords {
		require.NoError(b, s.Put(context.Background(), benchRecord(i)))
	}
}

// BenchmarkLatestHit measures what the proxy pays on every request: one
// Latest that finds the conversation's record, in a store of 1000.
func BenchmarkLatestHit(b *testing.B, s store.Store) {
	Preload(b, s)
	LoopLatestHit(b, s)
}

// LoopLatestHit is BenchmarkLatestHit's timed part, for a caller that
// reads its own counters around it.
func LoopLatestHit(b *testing.B, s store.Store) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Latest(ctx, fmt.Sprintf("bench-conv-%d", i%100)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPut measures what a compaction pays to store its result, in a
// store that keeps 1000 records (each Put replaces one of them).
func BenchmarkPut(b *testing.B, s store.Store) {
	Preload(b, s)
	LoopPut(b, s)
}

// LoopPut is BenchmarkPut's timed part.
func LoopPut(b *testing.B, s store.Store) {
	ctx := context.Background()
	recs := make([]*store.Record, BenchRecords)
	for i := range recs {
		recs[i] = benchRecord(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := s.Put(ctx, recs[i%BenchRecords]); err != nil {
			b.Fatal(err)
		}
	}
}
