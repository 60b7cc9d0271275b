//go:build unix

package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pipe (like /dev/null, /dev/stdout) is written in place: replacing it by
// rename would leave a regular file where the device or pipe was.
func TestWriteKeepsPipe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- err.Error()
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- string(b)
	}()
	require.NoError(t, Write(fifo, 0o644, func(w io.Writer) error { _, err := w.Write([]byte("report\n")); return err }))
	select {
	case s := <-got:
		assert.Equal(t, "report\n", s)
	case <-time.After(30 * time.Second):
		t.Fatal("the reader of the pipe got nothing")
	}
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeNamedPipe, "the pipe was replaced: %v", fi.Mode())
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1, "temporary file left behind")
}

// A symbolic link stays a link; its target gets the content.
func TestWriteFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.jsonl")
	link := filepath.Join(dir, "link.jsonl")
	require.NoError(t, os.WriteFile(target, []byte("old\n"), 0o644))
	require.NoError(t, os.Symlink(target, link))
	require.NoError(t, Write(link, 0o644, func(w io.Writer) error { _, err := w.Write([]byte("new\n")); return err }))
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSymlink, "the link was replaced by a file")
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "new\n", string(b))
}
