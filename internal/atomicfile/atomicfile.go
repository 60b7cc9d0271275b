// Package atomicfile writes a file so that readers see the old content or
// the new, never half of it: the bytes go to a temporary file in the same
// directory, are synced, and replace the target by rename.
//
// A target that is not a regular file (/dev/null, /dev/stdout, a named
// pipe) has no content to keep whole and must not be replaced: it is
// written in place. A symbolic link is followed, so the link stays and its
// target gets the new content.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write calls fill with a writer for a temporary file beside path and, if
// fill succeeds, renames it over path. On any error path is untouched and
// the temporary file is removed. A path to a device, pipe or socket is
// written in place instead (renaming over /dev/null would replace the
// device with a file for every program on the machine).
func Write(path string, perm os.FileMode, fill func(w io.Writer) error) (err error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(path)
			if err != nil {
				return fmt.Errorf("write %s: %w", path, err)
			}
			return Write(target, perm, fill)
		}
		if !fi.Mode().IsRegular() && !fi.IsDir() {
			return writeInPlace(path, fill)
		}
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = fill(tmp); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeInPlace writes to a target that is not a regular file.
func writeInPlace(path string, fill func(w io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fill(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
