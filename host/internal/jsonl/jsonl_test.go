package jsonl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

func validJSON(line []byte, _ int) error {
	if !json.Valid(line) {
		return fmt.Errorf("invalid JSON")
	}
	return nil
}

func collect(t *testing.T, path string) ([]string, *Torn) {
	t.Helper()
	var lines []string
	torn, err := Read(bg, path, Options{}, func(line []byte, n int) error {
		lines = append(lines, string(line))
		return validJSON(line, n)
	})
	require.NoError(t, err)
	return lines, torn
}

// open opens path for appending and records the lines other writers
// appended, as the host replays them.
func open(t *testing.T, path string) (*Log, *[]string) {
	t.Helper()
	var seen []string
	l, _, err := Open(bg, path, Options{}, func(line []byte, _ int) error {
		seen = append(seen, string(line))
		return nil
	})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l, &seen
}

func TestAppendAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	l, torn, err := Open(bg, path, Options{}, func([]byte, int) error { return nil })
	require.NoError(t, err)
	require.Nil(t, torn)
	big := `{"x":"` + strings.Repeat("a", 3<<20) + `"}`
	for _, line := range []string{`{"n":1}`, big, `{"n":3}`} {
		require.NoError(t, l.Append([]byte(line)))
	}
	require.NoError(t, l.Close())
	lines, torn := collect(t, path)
	assert.Nil(t, torn)
	require.Len(t, lines, 3)
	assert.Equal(t, big, lines[1])
}

// Cutting the file at every byte offset of its last line simulates a crash
// at any point of the last append: everything before that line loads, the
// torn bytes are kept aside, and the next append lands on a clean line.
func TestTornLastLineAtEveryOffset(t *testing.T) {
	dir := t.TempDir()
	first := []byte(`{"n":1}` + "\n" + `{"n":2,"s":"héllo"}` + "\n")
	last := []byte(`{"n":3,"text":"the last entry"}` + "\n")
	for cut := 0; cut < len(last); cut++ {
		path := filepath.Join(dir, fmt.Sprintf("c%d.jsonl", cut))
		require.NoError(t, os.WriteFile(path, append(append([]byte{}, first...), last[:cut]...), 0o644))
		var got int
		l, torn, err := Open(bg, path, Options{}, func(line []byte, _ int) error { got++; return nil })
		require.NoError(t, err, "cut %d", cut)
		assert.Equal(t, 2, got, "cut %d: lines loaded", cut)
		if cut == 0 {
			assert.Nil(t, torn, "cut 0: torn reported on a clean file")
		} else {
			require.NotNil(t, torn, "cut %d", cut)
			assert.Equal(t, 3, torn.Line, "cut %d", cut)
			assert.Equal(t, cut, torn.Bytes, "cut %d", cut)
			saved, err := os.ReadFile(torn.SavedTo)
			require.NoError(t, err, "cut %d", cut)
			assert.Equal(t, last[:cut], saved, "cut %d: torn bytes not preserved", cut)
		}
		require.NoError(t, l.Append([]byte(`{"n":4}`)))
		require.NoError(t, l.Close())
		lines, torn2 := collect(t, path)
		assert.Nil(t, torn2, "cut %d", cut)
		require.Len(t, lines, 3, "cut %d", cut)
		assert.Equal(t, `{"n":4}`, lines[2], "cut %d", cut)
	}
}

func TestRejectedLineNamesFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("{}\n{}\nnot json\n{}\n"), 0o644))
	_, err := Read(bg, path, Options{}, validJSON)
	var le *LineError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 3, le.Line)
	assert.Contains(t, err.Error(), "bad.jsonl:3:")
}

func TestFailedAppendLeavesNoPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	l, _, err := Open(bg, path, Options{}, func([]byte, int) error { return nil })
	require.NoError(t, err)
	require.NoError(t, l.Append([]byte(`{"n":1}`)))
	l.f.Close() // every later write fails
	assert.Error(t, l.Append([]byte(`{"n":2}`)), "append on a closed file succeeded")
	lines, torn := collect(t, path)
	assert.Equal(t, []string{`{"n":1}`}, lines)
	assert.Nil(t, torn)
}

// A write that puts half the line on disk and then fails, reporting no
// bytes written (as os.File.WriteAt does after a short write), is cut back
// to the length before the write.
func TestHalfWriteIsCutBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	l, _ := open(t, path)
	require.NoError(t, l.Append([]byte(`{"n":1}`)))
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	full := errors.New("no space left on device")
	l.write = func(b []byte) (int, error) {
		if _, err := l.f.Write(b[:len(b)/2]); err != nil {
			return 0, err
		}
		return 0, full
	}
	err = l.Append([]byte(`{"n":2,"text":"a line long enough to be split in two"}`))
	require.ErrorIs(t, err, full)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "half a line left in the log")

	l.write = l.f.Write
	require.NoError(t, l.Append([]byte(`{"n":3}`)))
	lines, torn := collect(t, path)
	assert.Nil(t, torn)
	assert.Equal(t, []string{`{"n":1}`, `{"n":3}`}, lines)
}

// A program that does not use this package appends a line between two of
// ours: our next line still goes at the real end, after it, and the line
// is passed to fn first.
func TestRawWriterLineComesFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	l, seen := open(t, path)
	require.NoError(t, l.Append([]byte(`{"n":1}`)))
	raw, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = raw.Write([]byte(`{"raw":1}` + "\n"))
	require.NoError(t, err)
	require.NoError(t, l.Append([]byte(`{"n":2}`)))

	// The raw writer slips a line in after our read, right before our write.
	l.write = func(b []byte) (int, error) {
		if _, err := raw.Write([]byte(`{"raw":2}` + "\n")); err != nil {
			return 0, err
		}
		return l.f.Write(b)
	}
	require.NoError(t, l.Append([]byte(`{"n":3}`)))
	l.write = l.f.Write
	require.NoError(t, raw.Close())
	require.NoError(t, l.Append([]byte(`{"n":4}`)))

	lines, torn := collect(t, path)
	assert.Nil(t, torn)
	assert.Equal(t, []string{`{"n":1}`, `{"raw":1}`, `{"n":2}`, `{"raw":2}`, `{"n":3}`, `{"n":4}`}, lines)
	assert.Equal(t, []string{`{"raw":1}`, `{"raw":2}`}, *seen)
	assert.Equal(t, 6, l.lines)
}

// Two logs open on one file exclude each other, in one process too, and
// each sees the other's lines before it writes.
func TestTwoWritersTakeTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	a, seenA := open(t, path)
	b, seenB := open(t, path)
	b.opts.LockTimeout = 20 * time.Millisecond
	require.NoError(t, a.Lock())
	err := b.Append([]byte(`{"b":1}`))
	require.ErrorIs(t, err, ErrLockTimeout)
	require.NoError(t, a.Append([]byte(`{"a":1}`)))
	a.Unlock()
	require.NoError(t, b.Append([]byte(`{"b":1}`)))
	require.NoError(t, a.Append([]byte(`{"a":2}`)))
	assert.Equal(t, []string{`{"a":1}`}, *seenB)
	assert.Equal(t, []string{`{"b":1}`}, *seenA)
	lines, _ := collect(t, path)
	assert.Equal(t, []string{`{"a":1}`, `{"b":1}`, `{"a":2}`}, lines)
}

func TestLockRefusesAChangedLog(t *testing.T) {
	t.Run("shortened", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		l, _ := open(t, path)
		require.NoError(t, l.Append([]byte(`{"n":1}`)))
		require.NoError(t, os.Truncate(path, 0))
		assert.ErrorIs(t, l.Append([]byte(`{"n":2}`)), ErrChanged)
	})
	t.Run("replaced", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		l, _ := open(t, path)
		require.NoError(t, os.WriteFile(path+".new", []byte(`{"n":9}`+"\n"), 0o644))
		require.NoError(t, os.Rename(path+".new", path))
		assert.ErrorIs(t, l.Append([]byte(`{"n":2}`)), ErrChanged)
		lines, _ := collect(t, path)
		assert.Equal(t, []string{`{"n":9}`}, lines, "the new file was written to")
	})
	t.Run("torn by another program", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		l, _ := open(t, path)
		raw, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = raw.Write([]byte(`{"raw":`))
		require.NoError(t, err)
		err = l.Append([]byte(`{"n":1}`))
		require.ErrorIs(t, err, ErrTornTail)
		assert.Contains(t, err.Error(), "s.jsonl:1:")
		_, err = raw.Write([]byte("1}\n"))
		require.NoError(t, raw.Close())
		require.NoError(t, err)
		require.NoError(t, l.Append([]byte(`{"n":1}`)), "the append is retryable")
		lines, _ := collect(t, path)
		assert.Equal(t, []string{`{"raw":1}`, `{"n":1}`}, lines)
	})
}

func TestSizeLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"n":1}`+"\n"+`{"n":2}`+"\n"), 0o644))
	_, err := Read(bg, path, Options{MaxBytes: 16}, validJSON)
	assert.NoError(t, err, "a file of exactly the limit is read")
	_, err = Read(bg, path, Options{MaxBytes: 15}, validJSON)
	assert.ErrorIs(t, err, ErrTooLarge)
	_, _, err = Open(bg, path, Options{MaxBytes: 15}, validJSON)
	assert.ErrorIs(t, err, ErrTooLarge)

	// An endless stream stops at the limit, with or without newlines.
	for _, b := range []byte{0, '\n'} {
		_, err = ReadFrom(bg, endless(b), "stream", Options{MaxBytes: 1 << 20}, func([]byte, int) error { return nil })
		assert.ErrorIs(t, err, ErrTooLarge)
	}
}

func TestReadStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	n := 0
	_, err := ReadFrom(ctx, endlessLines{}, "stream", Options{}, func([]byte, int) error {
		if n++; n == 1000 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, n, 2000)
}

// endless is an io.Reader of one byte repeated forever.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// endlessLines is an io.Reader of JSON lines, forever.
type endlessLines struct{}

func (endlessLines) Read(p []byte) (int, error) {
	line := []byte("{}\n")
	n := 0
	for n+len(line) <= len(p) {
		n += copy(p[n:], line)
	}
	if n == 0 {
		return 0, io.ErrShortBuffer
	}
	return n, nil
}
