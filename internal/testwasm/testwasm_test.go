package testwasm

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
