//go:build unix

package jsonl

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On a real full file system the last append fails part way; the log
// keeps only whole lines, exactly those whose Append succeeded.
func TestFullFileSystem(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a 64 KiB tmpfs to fill (needs root or CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	path := filepath.Join(dir, "s.jsonl")
	l, _ := open(t, path)
	var ok []string
	var failed error
	for i := 0; i < 1000 && failed == nil; i++ {
		// 3 KiB lines do not divide the 4 KiB pages: the failing write
		// is a partial one.
		line := fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 3000))
		if failed = l.Append([]byte(line)); failed == nil {
			ok = append(ok, line)
		}
	}
	require.Error(t, failed, "64 KiB never filled")
	assert.ErrorIs(t, failed, syscall.ENOSPC)
	lines, torn := collect(t, path)
	assert.Nil(t, torn, "a partial line was left")
	assert.Equal(t, ok, lines)
}

func TestOnlyRegularFilesAreRead(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	for _, path := range []string{"/dev/zero", fifo, t.TempDir()} {
		_, err := Read(bg, path, Options{}, validJSON)
		assert.ErrorIs(t, err, ErrNotRegular, path)
		if path != "/dev/zero" {
			_, _, err = Open(bg, path, Options{}, validJSON)
			if !errors.Is(err, ErrNotRegular) {
				assert.ErrorIs(t, err, syscall.EISDIR, path)
			}
		}
	}
}
