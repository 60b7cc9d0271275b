package host

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A crash can stop an append at any byte of the last line. Whatever the
// offset, the session reopens with every earlier entry, the compaction
// included, and accepts new messages.
func TestSessionSurvivesTornLastLineAtEveryOffset(t *testing.T) {
	e := newEngine(t, Config{KeepRecentTokens: 1500}, WithStrategy("structured", &recorder{}))
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	s, err := e.OpenSession(path)
	must(t, err)
	coding(t, s, 4, 300)
	_, err = e.Compact(ctx, s, CompactOptions{})
	must(t, err)
	want := s.Context()
	must(t, s.Append(user("the last message, torn by a crash")))
	must(t, s.Close())
	full, err := os.ReadFile(path)
	must(t, err)
	lastStart := len(full) - 1
	for lastStart > 0 && full[lastStart-1] != '\n' {
		lastStart--
	}
	for cut := lastStart + 1; cut < len(full); cut++ {
		p := filepath.Join(dir, "cut.jsonl")
		must(t, os.WriteFile(p, full[:cut], 0o644))
		s2, err := e.OpenSession(p)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if s2.Torn() == nil {
			t.Fatalf("cut at %d: torn line not reported", cut)
		}
		if !reflect.DeepEqual(s2.Context(), want) {
			t.Fatalf("cut at %d: context differs from before the torn append", cut)
		}
		must(t, s2.Append(user("after the crash")))
		must(t, s2.Close())
		s3, err := e.LoadSession(p)
		if err != nil || s3.Torn() != nil || s3.Len() != s2.Len() {
			t.Fatalf("cut at %d: reload after repair: %v torn %v", cut, err, s3.Torn())
		}
		os.Remove(p)
		matches, _ := filepath.Glob(p + ".torn-*")
		for _, m := range matches {
			os.Remove(m)
		}
	}
}
