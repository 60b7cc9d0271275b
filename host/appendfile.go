package host

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/compact-host/compact-host/host/internal/jsonl"
)

// FileState is what a reader saw of a file: its identity, size, time of
// last modification and the SHA-256 of its bytes. An append made on it
// (AppendCarrying) goes in only if the file is still that file, grown
// at most by lines appended after what was read.
type FileState struct {
	Path    string
	Size    int64
	ModTime time.Time
	SHA256  [sha256.Size]byte
	info    os.FileInfo
	// hash is the SHA-256 state after the bytes read, so the hash of the
	// file up to a later offset costs only the bytes after them.
	hash []byte
}

// DefaultAppendLockTimeout bounds the wait for a file's lock in
// AppendCarrying and TruncateIfUnchanged when the caller gives 0.
const DefaultAppendLockTimeout = 5 * time.Second

// ReadFileState reads the regular file at path whole, at most max bytes
// (max <= 0: DefaultMaxSessionBytes), hashing the bytes as they are read.
// A file whose size or modification time changes while it is read is
// being written by another program; the error wraps ErrLogChanged and
// says so.
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
	h := sha256.New()
	buf := bytes.NewBuffer(make([]byte, 0, before.Size()+1))
	if _, err := buf.ReadFrom(io.TeeReader(io.LimitReader(f, max+1), h)); err != nil {
		return nil, FileState{}, fmt.Errorf("%s: %w", path, err)
	}
	data := buf.Bytes()
	after, err := f.Stat()
	if err != nil {
		return nil, FileState{}, err
	}
	if int64(len(data)) != before.Size() || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		return nil, FileState{}, busyError(path, "it changed while it was read")
	}
	st := FileState{Path: path, Size: after.Size(), ModTime: after.ModTime(), info: after}
	copy(st.SHA256[:], h.Sum(nil))
	st.hash, err = h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil, FileState{}, err
	}
	return data, st, nil
}

// busyError is the refusal of a file another program is writing.
func busyError(path, what string) error {
	return fmt.Errorf("%s: %w: %s, so another program (a running agent?) is writing it; close the agent, or retry when it is idle", path, ErrLogChanged, what)
}

// Landed is a run of the bytes a file holds after the offset it was read
// to, as AppendCarrying finds them: its own appends (Ours), and lines
// another program appended meanwhile. Unseen marks another program's
// lines that landed before one of ours without having been read when
// ours were made, so ours do not account for them.
type Landed struct {
	Data   []byte
	Ours   bool
	Unseen bool
}

// CarryFunc makes the records that bring the lines another program
// appended into what a reader of the file sees after our own: tail is
// the file after the offset it was read to, in order, ending with the
// complete lines found after our latest append. Each call's tail extends
// the one before: runs are added, never changed. It returns nil when no
// line of tail is hidden from the reader, and an error when a hidden line
// cannot be carried.
type CarryFunc func(tail []Landed) ([]byte, error)

// The outcomes of AppendCarrying.
const (
	// OutcomeAppended: the block went in right after the bytes read.
	OutcomeAppended = "appended"
	// OutcomeCarried: another program's lines landed before the block,
	// and were carried after it.
	OutcomeCarried = "carried"
	// OutcomeRolledBack: lines landed before the block that could not be
	// carried, and the block was cut away again (the error says why).
	OutcomeRolledBack = "rolled_back"
	// OutcomeUnresolved: lines landed before the block that could not be
	// carried, and others after it, so it could not be cut away either;
	// the error says where it is.
	OutcomeUnresolved = "unresolved"
)

// AppendResult is what AppendCarrying did.
type AppendResult struct {
	// Outcome is one of the outcomes above; "" when nothing was written.
	Outcome string
	// Undo takes back what was appended (TruncateIfUnchanged); zero after
	// a roll back.
	Undo Appended
	// AgentLines are the lines another program wrote before one of our
	// appends, unseen when it was made; CarriedBytes is what was appended
	// to carry them.
	AgentLines   int
	CarriedBytes int64
	// Appends is how many appends were made, the block's included.
	Appends int
}

// maxCarryRounds bounds the appends that carry another program's lines:
// each round's window is a stat and a write, so only a program that
// writes between nearly every stat and write outlasts it.
const maxCarryRounds = 8

// AppendCarrying appends block to the file st was read from, in one write
// on an O_APPEND descriptor, and syncs it. It takes the file's exclusive
// lock (the one session logs take; waiting at most timeout, 0 for
// DefaultAppendLockTimeout), so two compact-host processes never append
// at once. Agents append without a lock; their lines may land between the
// bytes read and the block, where a reader of the file would no longer
// see them. So the file is read again from the offset it was read to
// after every append: when lines landed before ours, carry makes the
// records that bring them after it, appended the same way, at most
// maxCarryRounds times (OutcomeCarried). A carry that fails, or lines
// still landing before our latest append after the last round, roll back:
// our bytes are cut away if nothing was written after them, and the error
// wraps ErrLogChanged. With a nil carry any landed line rolls back.
//
// A file replaced, shortened, or modified without growing since it was
// read is refused before anything is written (ErrLogChanged). A failed
// write is cut back when nothing follows it.
func AppendCarrying(st FileState, block []byte, carry CarryFunc, timeout time.Duration) (AppendResult, error) {
	f, err := os.OpenFile(st.Path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return AppendResult{}, err
	}
	defer f.Close()
	if err := lockFile(f, st.Path, timeout); err != nil {
		return AppendResult{}, err
	}
	defer jsonl.UnlockFile(f)
	fi, err := f.Stat()
	if err != nil {
		return AppendResult{}, fmt.Errorf("%s: %w", st.Path, err)
	}
	switch {
	case st.info != nil && !os.SameFile(fi, st.info):
		return AppendResult{}, busyError(st.Path, "it was replaced since it was read")
	case fi.Size() < st.Size:
		return AppendResult{}, busyError(st.Path, fmt.Sprintf("it shrank from %d to %d bytes since it was read", st.Size, fi.Size()))
	case fi.Size() == st.Size && !fi.ModTime().Equal(st.ModTime):
		return AppendResult{}, busyError(st.Path, "it was modified since it was read")
	case fi.Size() > st.Size && carry == nil:
		return AppendResult{}, busyError(st.Path, fmt.Sprintf("it grew from %d to %d bytes since it was read", st.Size, fi.Size()))
	}
	w := &tailWriter{f: f, path: st.Path, read: st.Size, size: st.Size, base: st.Size}
	if err := w.append(block); err != nil {
		return AppendResult{}, err
	}
	res := AppendResult{Outcome: OutcomeAppended, Appends: 1}
	for round := 0; w.unseen(); round++ {
		var more []byte
		if carry == nil {
			err = errors.New("they cannot be carried after it")
		} else {
			more, err = w.build(carry)
		}
		if err != nil {
			return w.rollBack(err)
		}
		if more == nil {
			break
		}
		if round == maxCarryRounds {
			return w.rollBack(fmt.Errorf("lines still landed before the compaction after %d appends carrying them", maxCarryRounds))
		}
		if err := w.append(more); err != nil {
			return w.rollBack(err)
		}
		res.Outcome, res.Appends, res.CarriedBytes = OutcomeCarried, res.Appends+1, res.CarriedBytes+int64(len(more))
	}
	if err := f.Sync(); err != nil {
		return AppendResult{}, fmt.Errorf("%s: %w", st.Path, err)
	}
	res.AgentLines = w.agentLines()
	res.Undo, err = w.undo(st)
	return res, err
}

// tailWriter appends to a file and keeps what it finds after the offset
// the file was read to.
type tailWriter struct {
	f    *os.File
	path string
	read int64 // the end of what was read: tail covers the bytes from the offset the file was read to up to here
	size int64 // the file's size when last seen, a line being written included
	tail []Landed
	base int64 // where tail starts
}

// maxTailBytes bounds what is read after the offset the file was read to.
const maxTailBytes = 64 << 20

// readMore reads the complete lines after w.read into tail; a line still
// being written stays for the next read.
func (w *tailWriter) readMore(unseen bool) error {
	fi, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	w.size = fi.Size()
	if w.size <= w.read {
		return nil
	}
	if w.size-w.base > maxTailBytes {
		return fmt.Errorf("%s: %w: more than %d bytes were appended while the compaction was written", w.path, ErrLogChanged, maxTailBytes)
	}
	buf := make([]byte, w.size-w.read)
	n, err := w.f.ReadAt(buf, w.read)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	buf = buf[:bytes.LastIndexByte(buf[:n], '\n')+1]
	if len(buf) > 0 {
		w.tail = append(w.tail, Landed{Data: buf, Unseen: unseen})
		w.read += int64(len(buf))
	}
	return nil
}

// settleWait bounds the wait for a line another program is writing to
// be complete before ours is appended after it.
const settleWait = 500 * time.Millisecond

// settle reads what was appended since the last read, and waits for a
// line still being written to be complete: an append after half a line
// would join ours to it.
func (w *tailWriter) settle(unseen bool) error {
	deadline := time.Now().Add(settleWait)
	for {
		if err := w.readMore(unseen); err != nil {
			return err
		}
		if w.size == w.read {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w: its last line has stayed incomplete for %s", w.path, ErrLogChanged, settleWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// append writes b at the file's end in one write, then reads the file
// from the end of the last read: what another program appended before b
// is an unseen run, b must be there intact, and the complete lines after
// it are read too.
func (w *tailWriter) append(b []byte) error {
	// Lines read now were not there when b was made.
	if err := w.settle(true); err != nil {
		return err
	}
	n, err := w.f.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	// On an O_APPEND descriptor the offset is the end of the write,
	// wherever the kernel put it.
	end, serr := w.f.Seek(0, io.SeekCurrent)
	if err != nil {
		if n == 0 {
			return fmt.Errorf("%s: append: %w", w.path, err)
		}
		if serr == nil {
			if fi, e := w.f.Stat(); e == nil && fi.Size() == end && w.f.Truncate(end-int64(n)) == nil {
				return fmt.Errorf("%s: append: %w (the part written was removed)", w.path, err)
			}
		}
		return fmt.Errorf("%s: append failed (%w) and the %d bytes written could not be removed", w.path, err, n)
	}
	if serr != nil {
		return fmt.Errorf("%s: %w", w.path, serr)
	}
	start := end - int64(len(b))
	if start < w.read {
		return fmt.Errorf("%s: %w: the append landed at offset %d, before the end of what was read (%d)", w.path, ErrLogChanged, start, w.read)
	}
	got := make([]byte, end-w.read)
	if _, err := w.f.ReadAt(got, w.read); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	if !bytes.Equal(got[start-w.read:], b) {
		return fmt.Errorf("%s: %w: the bytes appended at offset %d were changed as they were written; the file was left as it is", w.path, ErrLogChanged, start)
	}
	if start > w.read {
		w.tail = append(w.tail, Landed{Data: got[:start-w.read], Unseen: true})
	}
	w.tail = append(w.tail, Landed{Data: b, Ours: true})
	w.read, w.size = end, end
	return w.readMore(false)
}

// build asks carry for the records to append; when the file grew while
// they were made, the new lines are read and carry asked again, so the
// window in which a line can land before them unseen is a stat and a
// write.
func (w *tailWriter) build(carry CarryFunc) ([]byte, error) {
	for tries := 0; ; tries++ {
		more, err := carry(w.tail)
		if err != nil || more == nil {
			return more, err
		}
		fi, err := w.f.Stat()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.path, err)
		}
		if fi.Size() == w.read || tries == maxCarryRounds {
			return more, nil
		}
		if err := w.settle(false); err != nil {
			return nil, err
		}
	}
}

// unseen reports whether another program's lines landed before one of
// our appends.
func (w *tailWriter) unseen() bool {
	for _, l := range w.tail {
		if l.Unseen {
			return true
		}
	}
	return false
}

// agentLines counts the lines that landed unseen.
func (w *tailWriter) agentLines() int {
	n := 0
	for _, l := range w.tail {
		if l.Unseen {
			n += bytes.Count(l.Data, []byte("\n"))
		}
	}
	return n
}

// ours returns where our first append starts, the index of its run in
// tail, and whether our appends are all that follows it.
func (w *tailWriter) ours() (start int64, i int, last bool) {
	start = w.base
	for i = 0; i < len(w.tail) && !w.tail[i].Ours; i++ {
		start += int64(len(w.tail[i].Data))
	}
	last = true
	for _, l := range w.tail[i:] {
		last = last && l.Ours
	}
	return start, i, last
}

// rollBack cuts our appends away when nothing follows them.
func (w *tailWriter) rollBack(cause error) (AppendResult, error) {
	n := w.agentLines()
	start, _, last := w.ours()
	fi, err := w.f.Stat()
	if err != nil {
		return AppendResult{}, fmt.Errorf("%s: %w", w.path, err)
	}
	if !last || fi.Size() != w.read {
		return AppendResult{Outcome: OutcomeUnresolved, AgentLines: n}, fmt.Errorf("%s: %w: another program (a running agent?) wrote %d lines before the compaction and %v; it wrote after the compaction too, so the compaction was left at offset %d; close the agent before compacting its file", w.path, ErrLogChanged, n, cause, start)
	}
	if err := w.f.Truncate(start); err != nil {
		return AppendResult{}, fmt.Errorf("%s: %w: another program wrote %d lines before the compaction and %v, and taking the compaction back failed: %v", w.path, ErrLogChanged, n, cause, err)
	}
	if err := w.f.Sync(); err != nil {
		return AppendResult{}, fmt.Errorf("%s: %w", w.path, err)
	}
	return AppendResult{Outcome: OutcomeRolledBack, AgentLines: n}, fmt.Errorf("%s: %w: another program (a running agent?) wrote %d lines while the compaction was appended and %v; the compaction was taken back and the file holds every line it wrote; close the agent, or retry when it is idle", w.path, ErrLogChanged, n, cause)
}

// undo describes our appends for TruncateIfUnchanged: all of them when
// nothing follows them, else the first, whose undo is then refused since
// another program wrote after it.
func (w *tailWriter) undo(st FileState) (Appended, error) {
	start, i, last := w.ours()
	h := sha256.New()
	if st.hash != nil {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(st.hash); err != nil {
			return Appended{}, err
		}
	} else if _, err := io.Copy(h, io.NewSectionReader(w.f, 0, st.Size)); err != nil {
		return Appended{}, fmt.Errorf("%s: %w", w.path, err)
	}
	for _, l := range w.tail[:i] {
		h.Write(l.Data)
	}
	ap := Appended{Offset: start}
	copy(ap.Prefix[:], h.Sum(nil))
	b := sha256.New()
	for _, l := range w.tail[i:] {
		if !last && ap.Len > 0 {
			break
		}
		b.Write(l.Data)
		ap.Len += int64(len(l.Data))
	}
	copy(ap.Block[:], b.Sum(nil))
	return ap, nil
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

func hashPrefix(f *os.File, n int64) ([sha256.Size]byte, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, n)); err != nil {
		return [sha256.Size]byte{}, err
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// Appended is what AppendCarrying added to a file, for
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
