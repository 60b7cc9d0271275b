package host

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/compact-host/compact-host/host/internal/jsonl"
)

// FileState is what a reader saw of a file: its identity, size, time of
// last modification and the SHA-256 of its bytes. An append made on it
// (AppendIfUnchanged) goes in only if the file is still exactly that.
type FileState struct {
	Path    string
	Size    int64
	ModTime time.Time
	SHA256  [sha256.Size]byte
	info    os.FileInfo
}

// DefaultAppendLockTimeout bounds the wait for a file's lock in
// AppendIfUnchanged and TruncateIfUnchanged when the caller gives 0.
const DefaultAppendLockTimeout = 5 * time.Second

// ReadFileState reads the regular file at path whole, at most max bytes
// (max <= 0: DefaultMaxSessionBytes). A file whose size or modification
// time changes while it is read is being written by another program; the
// error wraps ErrLogChanged and says so.
func ReadFileState(path string, max int64) ([]byte, FileState, error) {
	if max <= 0 {
		max = DefaultMaxSessionBytes
	}
	f, err := os.OpenFile(path, os.O_RDONLY|jsonl.OpenNonblock, 0)
	if err != nil {
		return nil, FileState{}, err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return nil, FileState{}, err
	}
	if !before.Mode().IsRegular() {
		return nil, FileState{}, fmt.Errorf("%s: %w (%s)", path, ErrNotRegularFile, before.Mode().Type())
	}
	if before.Size() > max {
		return nil, FileState{}, fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrSessionTooLarge, before.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, FileState{}, fmt.Errorf("%s: %w", path, err)
	}
	after, err := f.Stat()
	if err != nil {
		return nil, FileState{}, err
	}
	if int64(len(data)) != before.Size() || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		return nil, FileState{}, busyError(path, "it changed while it was read")
	}
	return data, FileState{Path: path, Size: after.Size(), ModTime: after.ModTime(), SHA256: sha256.Sum256(data), info: after}, nil
}

// busyError is the refusal of a file another program is writing.
func busyError(path, what string) error {
	return fmt.Errorf("%s: %w: %s, so another program (a running agent?) is writing it; close the agent, or retry when it is idle", path, ErrLogChanged, what)
}

// AppendIfUnchanged appends block to the file st was read from, in one
// write at its end, and syncs it. It takes the file's exclusive lock (the
// one session logs take; waiting at most timeout, 0 for
// DefaultAppendLockTimeout) and appends only if the file is still the one
// read, of the same size, modification time and bytes; otherwise nothing
// is written and the error wraps ErrLogChanged (or ErrLogBusy for the
// lock) naming the file and what to do. A failed write is cut back, so
// the file never keeps part of block. It returns what TruncateIfUnchanged
// needs to take block away again.
func AppendIfUnchanged(st FileState, block []byte, timeout time.Duration) (Appended, error) {
	f, err := os.OpenFile(st.Path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return Appended{}, err
	}
	defer f.Close()
	if err := lockFile(f, st.Path, timeout); err != nil {
		return Appended{}, err
	}
	defer jsonl.UnlockFile(f)
	if err := checkUnchanged(f, st); err != nil {
		return Appended{}, err
	}
	n, err := f.Write(block)
	if err == nil && n != len(block) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		if terr := f.Truncate(st.Size); terr != nil {
			return Appended{}, fmt.Errorf("%s: append failed (%w) and the partial write could not be removed: %v", st.Path, err, terr)
		}
		return Appended{}, fmt.Errorf("%s: append: %w", st.Path, err)
	}
	return AppendedTo(st.SHA256, st.Size, block), nil
}

// AppendedTo describes block appended to a file of size bytes whose
// SHA-256 was prefix: for a copy written with the block already in it.
func AppendedTo(prefix [sha256.Size]byte, size int64, block []byte) Appended {
	return Appended{Offset: size, Prefix: prefix, Block: sha256.Sum256(block), Len: int64(len(block))}
}

func lockFile(f *os.File, path string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultAppendLockTimeout
	}
	err := jsonl.LockFile(f, path, timeout)
	if errors.Is(err, jsonl.ErrLockTimeout) {
		return fmt.Errorf("%s: %w after %s: another program (a running agent?) holds the file's lock; close the agent, or retry when it is idle", path, ErrLogBusy, timeout)
	}
	return err
}

// checkUnchanged, under the lock, compares the file with what was read.
func checkUnchanged(f *os.File, st FileState) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", st.Path, err)
	}
	switch {
	case st.info != nil && !os.SameFile(fi, st.info):
		return busyError(st.Path, "it was replaced since it was read")
	case fi.Size() != st.Size:
		return busyError(st.Path, fmt.Sprintf("it grew from %d to %d bytes since it was read", st.Size, fi.Size()))
	case !fi.ModTime().Equal(st.ModTime):
		return busyError(st.Path, "it was modified since it was read")
	}
	sum, err := hashPrefix(f, st.Size)
	if err != nil {
		return fmt.Errorf("%s: %w", st.Path, err)
	}
	if sum != st.SHA256 {
		return busyError(st.Path, "its content changed since it was read")
	}
	return nil
}

func hashPrefix(f *os.File, n int64) ([sha256.Size]byte, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, n)); err != nil {
		return [sha256.Size]byte{}, err
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// Appended is what AppendIfUnchanged added to a file, for
// TruncateIfUnchanged to take away again.
type Appended struct {
	Offset int64             // where the block starts: the file's size before
	Prefix [sha256.Size]byte // SHA-256 of the file's bytes before the block
	Block  [sha256.Size]byte // SHA-256 of the block
	Len    int64             // the block's length
}

// TruncateIfUnchanged removes an appended block from the end of the file
// at path: it cuts the file back to ap.Offset, under the file's lock, only
// if the file is exactly the prefix and the block ap describes. Otherwise
// nothing changes and the error wraps ErrLogChanged, saying whether bytes
// were added after the block or the file was changed.
func TruncateIfUnchanged(path string, ap Appended, timeout time.Duration) error {
	offset := ap.Offset
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := lockFile(f, path, timeout); err != nil {
		return err
	}
	defer jsonl.UnlockFile(f)
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	end := offset + ap.Len
	switch {
	case fi.Size() > end:
		return fmt.Errorf("%s: %w: %d bytes were written after the compaction (the agent went on from it); undoing it would lose them, so nothing was changed", path, ErrLogChanged, fi.Size()-end)
	case fi.Size() < end:
		return fmt.Errorf("%s: %w: it is shorter (%d bytes) than the file the compaction was written to (%d); nothing was changed", path, ErrLogChanged, fi.Size(), end)
	}
	sum, err := hashPrefix(f, offset)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, offset, ap.Len)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if sum != ap.Prefix || !bytes.Equal(h.Sum(nil), ap.Block[:]) {
		return fmt.Errorf("%s: %w: its bytes differ from those the compaction was written to; nothing was changed", path, ErrLogChanged)
	}
	if err := f.Truncate(offset); err != nil {
		return fmt.Errorf("%s: undo: %w", path, err)
	}
	return f.Sync()
}
