// Package jsonl is an append-only file of JSON lines that survives crashes
// and other writers: every append is one write of a whole line at the real
// end of the file under an exclusive lock, a failed write is cut back, what
// other writers appended is read before ours goes in, and a torn last line
// left by a crash is detected, set aside and reported.
package jsonl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"
)

// Errors of reading and appending. Each is wrapped with the file's name
// and what to do.
var (
	// ErrTooLarge: the file is over Options.MaxBytes.
	ErrTooLarge = errors.New("over the size limit")
	// ErrNotRegular: the path names a device, a FIFO or a directory,
	// which could be read forever.
	ErrNotRegular = errors.New("not a regular file")
	// ErrLockTimeout: another writer held the log's lock for longer than
	// Options.LockTimeout. Retrying later is safe.
	ErrLockTimeout = errors.New("timed out waiting for the log's lock")
	// ErrChanged: the file was replaced, removed or shortened since it was
	// read, so appending would write past what this process knows.
	ErrChanged = errors.New("the log changed on disk")
	// ErrTornTail: another program left the last line without its
	// newline while the log was open. Retrying later is safe; reopening
	// the log sets the bytes aside.
	ErrTornTail = errors.New("the last line is incomplete")
)

// DefaultLockTimeout bounds the wait for the lock when Options leave it 0.
// Writers hold the lock for one read of what is new and one write.
const DefaultLockTimeout = 30 * time.Second

// Options bound reading and locking.
type Options struct {
	// MaxBytes is the largest file read, in bytes; 0 means no limit.
	MaxBytes int64
	// LockTimeout bounds the wait for another writer's lock.
	LockTimeout time.Duration
}

// Torn describes an incomplete last line found when a log was opened.
type Torn struct {
	Line   int   // 1-based line number of the torn line
	Offset int64 // byte offset where it starts
	Bytes  int   // its length
	// SavedTo is the file that now holds the torn bytes, when the log was
	// opened for writing and the tail was cut off.
	SavedTo string
}

func (t *Torn) String() string {
	s := fmt.Sprintf("line %d (offset %d, %d bytes) is incomplete", t.Line, t.Offset, t.Bytes)
	if t.SavedTo != "" {
		s += "; its bytes were moved to " + t.SavedTo
	}
	return s
}

// LineError is a complete line that fn rejected.
type LineError struct {
	Path string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Log is an open log for appending. It is not safe for concurrent use;
// the caller serializes its calls.
type Log struct {
	f    *os.File
	path string
	fn   func(line []byte, lineno int) error
	opts Options
	// end is where the lines this process has seen (replayed or written)
	// end, and lines how many there are.
	end   int64
	lines int
	held  bool
	// write is the file's Write; tests inject failing writers here.
	write func([]byte) (int, error)
	// Sync makes every append durable (fsync) before it returns.
	Sync bool
}

// pos is the end of the last complete line consumed.
type pos struct {
	offset int64
	line   int
}

// Read calls fn for every complete line of the regular file at path, in
// order; fn must not keep the line, whose bytes are reused once it
// returns. A last line without its newline is not passed to fn; it is
// returned as Torn. It stops with ctx's error when ctx is done.
func Read(ctx context.Context, path string, opts Options, fn func(line []byte, lineno int) error) (*Torn, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkFile(f, path, opts.MaxBytes); err != nil {
		return nil, err
	}
	torn, _, err := scan(ctx, f, path, pos{}, opts.MaxBytes, fn)
	return torn, err
}

// ReadFrom is Read over any reader; name stands for it in errors.
func ReadFrom(ctx context.Context, r io.Reader, name string, opts Options, fn func(line []byte, lineno int) error) (*Torn, error) {
	torn, _, err := scan(ctx, r, name, pos{}, opts.MaxBytes, fn)
	return torn, err
}

// checkFile refuses what is not a regular file, or is over max bytes.
func checkFile(f *os.File, path string, max int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fi.Mode().Type())
	}
	if max > 0 && fi.Size() > max {
		return fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrTooLarge, fi.Size(), max)
	}
	return nil
}

// capped reads at most max bytes and fails with ErrTooLarge beyond them.
type capped struct {
	r    io.Reader
	left int64 // max+1 - bytes read
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left <= 0 {
		return n, ErrTooLarge
	}
	return n, err
}

// scan calls fn for each complete line of r, which starts at from in the
// file. It returns the end of the last line consumed, also on error, so a
// caller knows what fn has applied.
func scan(ctx context.Context, r io.Reader, path string, from pos, max int64, fn func([]byte, int) error) (*Torn, pos, error) {
	if max > 0 {
		r = &capped{r: r, left: max - from.offset + 1}
	}
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	at := from
	var buf []byte // a line longer than br's buffer
	for {
		if at.line%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, at, fmt.Errorf("%s: read stopped at line %d: %w", path, at.line, err)
			}
		}
		// A line is read in place in br's buffer when it fits.
		rec, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			buf = append(buf[:0], rec...)
			for errors.Is(err, bufio.ErrBufferFull) {
				rec, err = br.ReadSlice('\n')
				buf = append(buf, rec...)
			}
			rec = buf
		}
		if err == io.EOF {
			if len(rec) > 0 {
				return &Torn{Line: at.line + 1, Offset: at.offset, Bytes: len(rec)}, at, nil
			}
			return nil, at, nil
		}
		if errors.Is(err, ErrTooLarge) {
			return nil, at, fmt.Errorf("%s: %w: it holds more than %d bytes", path, ErrTooLarge, max)
		}
		if err != nil {
			return nil, at, fmt.Errorf("%s: %w", path, err)
		}
		line := rec[:len(rec)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) > 0 {
			if err := fn(line, at.line+1); err != nil {
				return nil, at, &LineError{Path: path, Line: at.line + 1, Err: err}
			}
		}
		at.line++
		at.offset += int64(len(rec))
	}
}

// readers are the buffers scan reads through, kept for the next scan.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 1<<16) }}

// Open reads the log at path like Read and opens it for appending, creating
// it if needed. A torn tail is moved to "<path>.torn-<unix nanos>" and cut
// off, so the next append starts on a line of its own and nothing is lost.
// fn also receives, before each append, the lines other writers appended
// since.
func Open(ctx context.Context, path string, opts Options, fn func(line []byte, lineno int) error) (*Log, *Torn, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|openNonblock, 0o644)
	if err != nil {
		return nil, nil, err
	}
	if err := checkFile(f, path, opts.MaxBytes); err != nil {
		f.Close()
		return nil, nil, err
	}
	l := &Log{f: f, path: path, fn: fn, opts: opts, write: f.Write}
	// The bulk is read without the lock, so writers wait only for what
	// they append meanwhile. A last line seen incomplete here may be one
	// being written; it is judged again under the lock.
	_, at, err := scan(ctx, io.NewSectionReader(f, 0, math.MaxInt64), path, pos{}, opts.MaxBytes, fn)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	l.end, l.lines = at.offset, at.line
	if err := l.lock(); err != nil {
		f.Close()
		return nil, nil, err
	}
	torn, err := l.catchUp(ctx, true)
	l.Unlock()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return l, torn, nil
}

// Lock takes the log's exclusive lock, waiting at most the lock timeout,
// and passes fn the lines other writers appended since this process last
// read or wrote. Appends until Unlock then go in without another wait.
// A caller that must decide on what the log holds now (a compaction that
// must still describe it) locks first, decides, then appends.
func (l *Log) Lock() error {
	if l.held {
		return nil
	}
	if err := l.lock(); err != nil {
		return err
	}
	if _, err := l.catchUp(context.Background(), false); err != nil {
		l.Unlock()
		return err
	}
	return nil
}

func (l *Log) lock() error {
	timeout := l.opts.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	deadline := time.Now().Add(timeout)
	wait := 50 * time.Microsecond
	for {
		ok, err := tryLock(l.f)
		if err != nil {
			return fmt.Errorf("%s: lock: %w", l.path, err)
		}
		if ok {
			l.held = true
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w after %s; another process is writing it, retry later", l.path, ErrLockTimeout, timeout)
		}
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Millisecond)
	}
}

// Held reports whether Lock holds the lock.
func (l *Log) Held() bool { return l.held }

// Unlock releases the lock taken by Lock.
func (l *Log) Unlock() {
	if l.held {
		unlock(l.f)
		l.held = false
	}
}

// catchUp, under the lock, replays what other writers appended. A torn
// tail is set aside when setAside (at open), refused otherwise: under the
// lock no writer of ours is mid-line, but one that does not lock may be.
func (l *Log) catchUp(ctx context.Context, setAside bool) (*Torn, error) {
	fi, err := l.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.path, err)
	}
	if named, err := os.Stat(l.path); err != nil || !os.SameFile(fi, named) {
		return nil, fmt.Errorf("%s: %w: the file was replaced or removed since it was opened; reopen it", l.path, ErrChanged)
	}
	if fi.Size() < l.end {
		return nil, fmt.Errorf("%s: %w: it shrank from %d to %d bytes since it was read; reopen it", l.path, ErrChanged, l.end, fi.Size())
	}
	if fi.Size() == l.end {
		return nil, nil
	}
	torn, at, err := scan(ctx, io.NewSectionReader(l.f, l.end, fi.Size()-l.end), l.path, pos{l.end, l.lines}, l.opts.MaxBytes, l.fn)
	l.end, l.lines = at.offset, at.line
	if err != nil || torn == nil {
		return nil, err
	}
	if !setAside {
		return nil, fmt.Errorf("%s:%d: %w (%d bytes without a newline, written by a program that does not lock the log); retry, or reopen the log to set them aside", l.path, torn.Line, ErrTornTail, torn.Bytes)
	}
	tail := make([]byte, torn.Bytes)
	if _, err := l.f.ReadAt(tail, torn.Offset); err != nil {
		return nil, fmt.Errorf("%s: read torn tail: %w", l.path, err)
	}
	saved := fmt.Sprintf("%s.torn-%d", l.path, time.Now().UnixNano())
	if err := os.WriteFile(saved, tail, 0o644); err != nil {
		return nil, fmt.Errorf("%s: save torn tail: %w", l.path, err)
	}
	if err := l.f.Truncate(torn.Offset); err != nil {
		return nil, fmt.Errorf("%s: cut torn tail: %w", l.path, err)
	}
	torn.SavedTo = saved
	return torn, nil
}

// Append writes line and a newline in one write at the end of the file,
// taking the lock for the call unless Lock holds it. If the write fails
// (a full disk), the file is cut back to its length before the write,
// whatever the write reported, so the log never holds half a line.
func (l *Log) Append(line []byte) error {
	if !l.held {
		if err := l.Lock(); err != nil {
			return err
		}
		defer l.Unlock()
	}
	buf := make([]byte, 0, len(line)+1)
	buf = append(buf, line...)
	buf = append(buf, '\n')
	before := l.end
	n, err := l.write(buf)
	if err == nil && n != len(buf) {
		err = io.ErrShortWrite
	}
	if err == nil && l.Sync {
		err = l.f.Sync()
	}
	if err != nil {
		if terr := l.f.Truncate(before); terr != nil {
			return fmt.Errorf("%s: append failed (%w) and the partial line could not be removed: %v", l.path, err, terr)
		}
		return fmt.Errorf("%s: append: %w", l.path, err)
	}
	// O_APPEND put the line at the real end. If a program that does not
	// lock the log appended after our read, its lines sit before ours:
	// replay them, so memory keeps the file's order.
	end, err := l.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("%s: append: %w", l.path, err)
	}
	if start := end - int64(len(buf)); start > l.end {
		torn, at, err := scan(context.Background(), io.NewSectionReader(l.f, l.end, start-l.end), l.path, pos{l.end, l.lines}, 0, l.fn)
		if err != nil {
			return err
		}
		if torn != nil {
			return fmt.Errorf("%s:%d: %w: a program that does not lock the log wrote part of a line just before ours", l.path, torn.Line, ErrTornTail)
		}
		l.lines = at.line
	}
	l.end = end
	l.lines++
	return nil
}

// Path is the file the log writes.
func (l *Log) Path() string { return l.path }

// Close releases the lock if held and closes the file.
func (l *Log) Close() error {
	l.Unlock()
	return l.f.Close()
}
