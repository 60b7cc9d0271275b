// Package jsonl is an append-only file of JSON lines that survives crashes:
// every append is one write of a whole line, a failed write is cut back, and
// a torn last line left by a crash is detected, set aside and reported.
package jsonl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

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

// Log is an open log for appending.
type Log struct {
	f    *os.File
	path string
	size int64
	// Sync makes every append durable (fsync) before it returns.
	Sync bool
}

// Read calls fn for every complete line of the file at path, in order. A
// last line without its newline is not passed to fn; it is returned as Torn.
func Read(path string, fn func(line []byte, lineno int) error) (*Torn, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return scan(f, path, fn)
}

// ReadFrom is Read over any reader; name stands for the file in errors.
func ReadFrom(r io.Reader, name string, fn func(line []byte, lineno int) error) (*Torn, int64, error) {
	return scan(r, name, fn)
}

func scan(r io.Reader, path string, fn func([]byte, int) error) (*Torn, int64, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var (
		offset int64
		lineno int
		buf    []byte
	)
	for {
		buf = buf[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			buf = append(buf, chunk...)
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if len(buf) > 0 {
			lineno++
		}
		if err == io.EOF {
			if len(buf) > 0 {
				return &Torn{Line: lineno, Offset: offset, Bytes: len(buf)}, offset, nil
			}
			return nil, offset, nil
		}
		if err != nil {
			return nil, offset, fmt.Errorf("%s: %w", path, err)
		}
		line := buf[:len(buf)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) > 0 {
			if err := fn(line, lineno); err != nil {
				return nil, offset, &LineError{Path: path, Line: lineno, Err: err}
			}
		}
		offset += int64(len(buf))
	}
}

// Open reads the log at path like Read and opens it for appending, creating
// it if needed. A torn tail is moved to "<path>.torn-<unix nanos>" and cut
// off, so the next append starts on a line of its own and nothing is lost.
func Open(path string, fn func(line []byte, lineno int) error) (*Log, *Torn, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	torn, good, err := scan(f, path, fn)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if torn != nil {
		tail := make([]byte, torn.Bytes)
		if _, err := f.ReadAt(tail, torn.Offset); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: read torn tail: %w", path, err)
		}
		saved := fmt.Sprintf("%s.torn-%d", path, time.Now().UnixNano())
		if err := os.WriteFile(saved, tail, 0o644); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: save torn tail: %w", path, err)
		}
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: cut torn tail: %w", path, err)
		}
		torn.SavedTo = saved
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	return &Log{f: f, path: path, size: good}, torn, nil
}

// Append writes line and a newline in one write. If the write fails part
// way (a full disk), the file is cut back to where it was, so the log never
// holds half a line.
func (l *Log) Append(line []byte) error {
	buf := make([]byte, 0, len(line)+1)
	buf = append(buf, line...)
	buf = append(buf, '\n')
	n, err := l.f.WriteAt(buf, l.size)
	if err == nil && l.Sync {
		err = l.f.Sync()
	}
	if err != nil {
		if n > 0 {
			if terr := l.f.Truncate(l.size); terr != nil {
				return fmt.Errorf("%s: append failed (%w) and the partial line could not be removed: %v", l.path, err, terr)
			}
		}
		return fmt.Errorf("%s: append: %w", l.path, err)
	}
	l.size += int64(n)
	return nil
}

// Path is the file the log writes.
func (l *Log) Path() string { return l.path }

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }
