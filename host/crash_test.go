package host

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
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

// TestKilledWriter kills a process that appends large messages to a
// session log as fast as it can, at several moments, and reopens the log
// each time: every complete line loads, a torn last line is set aside,
// and the session takes new messages.
func TestKilledWriter(t *testing.T) {
	if os.Getenv("COMPACT_HOST_CRASH_WRITER") != "" {
		crashWriter(os.Getenv("COMPACT_HOST_CRASH_WRITER"))
		return
	}
	if testing.Short() {
		t.Skip("spawns writer processes")
	}
	e := newEngine(t, Config{})
	for round, delay := range []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 120 * time.Millisecond} {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriter$")
		cmd.Env = append(os.Environ(), "COMPACT_HOST_CRASH_WRITER="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the writer has written something, then kill it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("writer wrote nothing")
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(delay)
		cmd.Process.Kill()
		cmd.Wait()

		s, err := e.OpenSession(path)
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		n := s.Len()
		for i, m := range s.Messages() {
			if m.ID != fmt.Sprintf("w%d", i) || len(m.Content) != 1 || len(m.Content[0].Text) != crashMessageSize {
				t.Fatalf("round %d: message %d is damaged", round, i)
			}
		}
		must(t, s.Append(user("after the crash")))
		must(t, s.Close())
		s2, err := e.LoadSession(path)
		if err != nil || s2.Len() != n+1 || s2.Torn() != nil {
			t.Fatalf("round %d: reload: %v, %d messages (want %d), torn %v", round, err, s2.Len(), n+1, s2.Torn())
		}
		t.Logf("round %d: killed after %d whole messages; torn tail: %v", round, n, s.Torn() != nil)
	}
}

const crashMessageSize = 256 << 10

// crashWriter appends 256 KiB messages to path until it is killed.
func crashWriter(path string) {
	e, err := New(Config{ContextWindow: 1 << 30, Tokenizer: "chars"})
	if err != nil {
		os.Exit(2)
	}
	s, err := e.OpenSession(path)
	if err != nil {
		os.Exit(2)
	}
	body := strings.Repeat("x", crashMessageSize)
	for i := 0; ; i++ {
		if err := s.Append(Message{ID: fmt.Sprintf("w%d", i), Role: "user", Content: []Block{{Type: "text", Text: body}}}); err != nil {
			os.Exit(3)
		}
	}
}
