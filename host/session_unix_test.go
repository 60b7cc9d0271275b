//go:build unix

package host

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenSessionReadsOnlyRegularFiles(t *testing.T) {
	e := newEngine(t, Config{})
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	for _, path := range []string{"/dev/zero", fifo} {
		within(t, 30*time.Second, func() {
			_, err := e.OpenSession(path)
			assert.ErrorIs(t, err, ErrNotRegularFile, path)
			_, err = e.LoadSession(path)
			assert.ErrorIs(t, err, ErrNotRegularFile, path)
		})
	}
}
