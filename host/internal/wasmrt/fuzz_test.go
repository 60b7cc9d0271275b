package wasmrt

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// FuzzLoad loads arbitrary bytes as a plugin: it fails with a typed error
// or loads, and never panics.
func FuzzLoad(f *testing.F) {
	entries, _ := hostile.ReadDir("testdata")
	for _, e := range entries {
		b, _ := hostile.ReadFile("testdata/" + e.Name())
		f.Add(b)
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	e, err := NewEngine(Config{MemoryLimitPages: 16})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, bin []byte) {
		// Long enough for a module of the seeds to load on a busy
		// machine; a module that loops at instantiation (initloop,
		// startloop, sleepinit) costs this much per input.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		m, err := e.Load(ctx, "fuzz.wasm", bin)
		if err != nil {
			var pe *pluginapi.Error
			require.ErrorAs(t, err, &pe, "untyped error")
			return
		}
		m.Close()
	})
}
