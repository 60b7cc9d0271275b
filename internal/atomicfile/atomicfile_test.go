package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteReplacesOrLeavesAlone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	os.WriteFile(path, []byte("old\n"), 0o644)
	boom := errors.New("disk full")
	err := Write(path, 0o644, func(w io.Writer) error {
		w.Write([]byte("half of the new"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	b, _ := os.ReadFile(path)
	assert.Equal(t, "old\n", string(b), "target changed on failure")
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1, "temporary file left behind")
	require.NoError(t, Write(path, 0o600, func(w io.Writer) error { _, err := w.Write([]byte("new\n")); return err }))
	b, _ = os.ReadFile(path)
	assert.Equal(t, "new\n", string(b))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}
