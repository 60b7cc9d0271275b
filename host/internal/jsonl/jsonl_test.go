package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func collect(t *testing.T, path string) ([]string, *Torn) {
	t.Helper()
	var lines []string
	torn, _, err := Read(path, func(line []byte, _ int) error {
		if !json.Valid(line) {
			return fmt.Errorf("invalid JSON")
		}
		lines = append(lines, string(line))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines, torn
}

func TestAppendAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	l, torn, err := Open(path, func([]byte, int) error { return nil })
	if err != nil || torn != nil {
		t.Fatal(err, torn)
	}
	big := `{"x":"` + strings.Repeat("a", 3<<20) + `"}`
	for _, line := range []string{`{"n":1}`, big, `{"n":3}`} {
		if err := l.Append([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	lines, torn := collect(t, path)
	if len(lines) != 3 || lines[1] != big || torn != nil {
		t.Fatalf("got %d lines, torn %v", len(lines), torn)
	}
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
		if err := os.WriteFile(path, append(append([]byte{}, first...), last[:cut]...), 0o644); err != nil {
			t.Fatal(err)
		}
		var got int
		l, torn, err := Open(path, func(line []byte, _ int) error { got++; return nil })
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if got != 2 {
			t.Fatalf("cut %d: loaded %d lines, want 2", cut, got)
		}
		if cut == 0 {
			if torn != nil {
				t.Fatalf("cut 0: torn reported on a clean file")
			}
		} else {
			if torn == nil || torn.Line != 3 || torn.Bytes != cut {
				t.Fatalf("cut %d: torn = %+v", cut, torn)
			}
			saved, err := os.ReadFile(torn.SavedTo)
			if err != nil || !bytes.Equal(saved, last[:cut]) {
				t.Fatalf("cut %d: torn bytes not preserved: %q %v", cut, saved, err)
			}
		}
		if err := l.Append([]byte(`{"n":4}`)); err != nil {
			t.Fatal(err)
		}
		l.Close()
		lines, torn2 := collect(t, path)
		if torn2 != nil || len(lines) != 3 || lines[2] != `{"n":4}` {
			t.Fatalf("cut %d: after append got %q torn %v", cut, lines, torn2)
		}
	}
}

func TestRejectedLineNamesFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(path, []byte("{}\n{}\nnot json\n{}\n"), 0o644)
	_, _, err := Read(path, func(line []byte, _ int) error {
		if !json.Valid(line) {
			return fmt.Errorf("invalid JSON")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:3:") {
		t.Fatalf("got %v", err)
	}
}

func TestFailedAppendLeavesNoPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	l, _, err := Open(path, func([]byte, int) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	l.Append([]byte(`{"n":1}`))
	l.f.Close() // every later write fails
	if err := l.Append([]byte(`{"n":2}`)); err == nil {
		t.Fatal("append on a closed file succeeded")
	}
	lines, torn := collect(t, path)
	if len(lines) != 1 || torn != nil {
		t.Fatalf("got %q torn %v", lines, torn)
	}
}
