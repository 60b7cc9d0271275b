package testwasm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
)

func TestPruneDropsOldEntriesThenTheOldestPastTheSizeBound(t *testing.T) {
	root := t.TempDir()
	now := time.Now()
	write := func(version, name string, size int, age time.Duration) string {
		p := filepath.Join(root, version, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		f, err := os.Create(p)
		require.NoError(t, err)
		// Sparse: the size is what prune reads, not what the disk holds.
		require.NoError(t, f.Truncate(int64(size)))
		require.NoError(t, f.Close())
		require.NoError(t, os.Chtimes(p, now.Add(-age), now.Add(-age)))
		return p
	}
	stale := write("wazero-v1.0.0-amd64-linux", "a", 10, maxAge+time.Hour)
	fresh := write("wazero-v1.1.0-amd64-linux", "b", 10, time.Hour)
	newest := write("wazero-v1.1.0-amd64-linux", "c", maxBytes-5, time.Minute)
	older := write("wazero-v1.1.0-amd64-linux", "d", 10, 2*time.Hour)

	prune(root, now)

	for p, kept := range map[string]bool{stale: false, newest: true, fresh: false, older: false} {
		_, err := os.Stat(p)
		assert.Equal(t, kept, err == nil, "%s kept: %v", p, err)
	}
}

// A module compiled through a directory given to ShareCompiled lands in
// the shared cache, not in that directory.
func TestShareCompiledPutsModulesInTheSharedCache(t *testing.T) {
	t.Setenv(DirEnv, t.TempDir())
	shared, err := Dir()
	require.NoError(t, err)
	if shared != os.Getenv(DirEnv) {
		t.Skip("Dir was resolved before this test set its variable")
	}
	own, err := ShareCompiled(t.TempDir())
	require.NoError(t, err)
	cache, err := wazero.NewCompilationCacheWithDir(own)
	require.NoError(t, err)
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	// One type (func), one function of that type, its empty body.
	module := []byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x0a\x04\x01\x02\x00\x0b")
	_, err = rt.CompileModule(ctx, module)
	require.NoError(t, err)
	require.NoError(t, rt.Close(ctx))
	require.NoError(t, cache.Close(ctx))

	entries, err := os.ReadDir(own)
	require.NoError(t, err)
	require.Len(t, entries, 1, "wazero made a directory of its own beside the link")
	compiled, err := os.ReadDir(filepath.Join(shared, entries[0].Name()))
	require.NoError(t, err)
	assert.NotEmpty(t, compiled, "no compiled module in the shared cache")
}
