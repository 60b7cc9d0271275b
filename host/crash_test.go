package host

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A crash can stop an append at any byte of the last line. Whatever the
// offset, the session reopens with every earlier entry, the compaction
// included, and accepts new messages.
func TestSessionSurvivesTornLastLineAtEveryOffset(t *testing.T) {
	e := newEngine(t, Config{KeepRecentTokens: 1500}, WithStrategy("structured", &recorder{}))
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	s, err := e.OpenSession(path)
	require.NoError(t, err)
	coding(t, s, 4, 300)
	_, err = e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	want := s.Context()
	require.NoError(t, s.Append(user("the last message, torn by a crash")))
	require.NoError(t, s.Close())
	full, err := os.ReadFile(path)
	require.NoError(t, err)
	lastStart := len(full) - 1
	for lastStart > 0 && full[lastStart-1] != '\n' {
		lastStart--
	}
	for cut := lastStart + 1; cut < len(full); cut++ {
		p := filepath.Join(dir, "cut.jsonl")
		require.NoError(t, os.WriteFile(p, full[:cut], 0o644))
		s2, err := e.OpenSession(p)
		require.NoError(t, err, "cut at %d", cut)
		require.NotNil(t, s2.Torn(), "cut at %d: torn line not reported", cut)
		require.Equal(t, want, s2.Context(), "cut at %d: context differs from before the torn append", cut)
		require.NoError(t, s2.Append(user("after the crash")))
		require.NoError(t, s2.Close())
		s3, err := e.LoadSession(p)
		require.NoError(t, err, "cut at %d: reload after repair", cut)
		require.Nil(t, s3.Torn(), "cut at %d: reload after repair", cut)
		require.Equal(t, s2.Len(), s3.Len(), "cut at %d: reload after repair", cut)
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
		require.NoError(t, cmd.Start())
		// Wait until the writer has written something, then kill it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				require.Fail(t, "writer wrote nothing")
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(delay)
		cmd.Process.Kill()
		cmd.Wait()

		s, err := e.OpenSession(path)
		require.NoError(t, err, "round %d: reopen after kill", round)
		n := s.Len()
		for i, m := range s.Messages() {
			require.Equal(t, fmt.Sprintf("w%d", i), m.ID, "round %d: message %d is damaged", round, i)
			require.Len(t, m.Content, 1, "round %d: message %d is damaged", round, i)
			require.Len(t, m.Content[0].Text, crashMessageSize, "round %d: message %d is damaged", round, i)
		}
		require.NoError(t, s.Append(user("after the crash")))
		require.NoError(t, s.Close())
		s2, err := e.LoadSession(path)
		require.NoError(t, err, "round %d: reload", round)
		assert.Equal(t, n+1, s2.Len(), "round %d: reload", round)
		assert.Nil(t, s2.Torn(), "round %d: reload", round)
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
