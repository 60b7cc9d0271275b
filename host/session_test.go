package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin"
)

const (
	agentLogEnv  = "COMPACT_HOST_AGENT_LOG"
	agentLines   = 1500
	agentHeadway = 50 // agent lines the compaction waits for after planning
)

// agentWriter is the agent of TestAgentAppendsDuringCompaction, run in a
// child process: it appends agentLines messages through the library.
func agentWriter(path string) {
	e, err := New(Config{ContextWindow: 1 << 30, Tokenizer: "chars"})
	if err == nil {
		var s *Session
		if s, err = e.OpenSession(path); err == nil {
			for i := 0; i < agentLines && err == nil; i++ {
				err = s.Append(Message{ID: fmt.Sprintf("agent-%d", i), Role: abi.RoleUser, Content: []Block{{Type: abi.BlockText, Text: fmt.Sprintf("agent note %d", i)}}})
			}
			if err == nil {
				err = s.Close()
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// countIn counts the occurrences of sub in the file at path.
func countIn(t *testing.T, path, sub string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Count(string(b), sub)
}

// An agent process appends messages to the log while a compaction of the
// same log runs and commits. Every agent line stays, the log loads, and
// the compaction is there, with the lines appended meanwhile kept after it.
func TestAgentAppendsDuringCompaction(t *testing.T) {
	if path := os.Getenv(agentLogEnv); path != "" {
		agentWriter(path)
		return
	}
	if testing.Short() {
		t.Skip("spawns an agent process")
	}
	path := filepath.Join(t.TempDir(), "run.jsonl")
	rec := &recorder{}
	// The strategy lets the agent write agentHeadway lines after the plan
	// was made, so the commit must fold them in.
	waiting := StrategyFunc(func(ctx context.Context, svc plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		deadline := time.Now().Add(30 * time.Second)
		for countIn(t, path, `"agent-`) < agentHeadway {
			if time.Now().After(deadline) {
				return nil, errors.New("the agent wrote nothing")
			}
			time.Sleep(time.Millisecond)
		}
		return rec.Summarize(ctx, svc, req)
	})
	e := newEngine(t, Config{KeepRecentTokens: 1500}, WithStrategy("structured", waiting))
	s, err := e.OpenSession(path)
	require.NoError(t, err)
	coding(t, s, 6, 300)
	own := s.Len()

	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestAgentAppendsDuringCompaction$")
	cmd.Env = append(os.Environ(), agentLogEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())

	c, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, s.Len(), own+agentHeadway, "the commit did not replay the agent's lines")
	require.NoError(t, cmd.Wait(), "agent: %s", stderr.String())

	// Our next append comes after every agent line.
	require.NoError(t, s.Append(user("after the agent")))
	require.NoError(t, s.Close())
	assert.Equal(t, agentLines, countIn(t, path, `"agent-`))

	back, err := e.LoadSession(path)
	require.NoError(t, err)
	assert.Nil(t, back.Torn())
	require.Equal(t, own+agentLines+1, back.Len())
	msgs := back.Messages()
	next := 0
	for _, m := range msgs[own:] {
		if strings.HasPrefix(m.ID, "agent-") {
			assert.Equal(t, fmt.Sprintf("agent-%d", next), m.ID, "agent lines out of order")
			next++
		}
	}
	assert.Equal(t, agentLines, next)
	assert.Equal(t, "after the agent", msgs[len(msgs)-1].Content[0].Text)
	require.Len(t, back.Compactions(), 1)
	assert.Equal(t, c.ID, back.Compactions()[0].ID)
	assert.Equal(t, c.FoldedThrough, back.Compactions()[0].FoldedThrough)
	ctxMsgs := back.Context()
	assert.Equal(t, "after the agent", ctxMsgs[len(ctxMsgs)-1].Content[0].Text, "the context ends with the newest message")
}

// barrier holds every caller until n calls have arrived.
type barrier struct {
	mu      sync.Mutex
	arrived int
	n       int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) wait() error {
	b.mu.Lock()
	if b.arrived++; b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("the other compaction never started")
	}
}

// Two compactions of one log run at once, from two handles on it. Both
// plan from the same log; the first to commit wins and the other is told
// which entry it conflicts with, having written nothing. Run again, it
// builds on the winner.
func TestTwoCompactionsAtOnce(t *testing.T) {
	rec := &recorder{}
	gate := newBarrier(2)
	strategy := StrategyFunc(func(ctx context.Context, svc plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		if err := gate.wait(); err != nil {
			return nil, err
		}
		return rec.Summarize(ctx, svc, req)
	})
	e := newEngine(t, Config{KeepRecentTokens: 1500}, WithStrategy("structured", strategy))
	path := filepath.Join(t.TempDir(), "run.jsonl")
	first, err := e.OpenSession(path)
	require.NoError(t, err)
	coding(t, first, 6, 300)
	second, err := e.OpenSession(path)
	require.NoError(t, err)
	t.Cleanup(func() { first.Close(); second.Close() })

	var (
		wg   sync.WaitGroup
		res  [2]Compaction
		errs [2]error
	)
	for i, s := range []*Session{first, second} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = e.Compact(ctx, s, CompactOptions{})
		}()
	}
	wg.Wait()
	won, lost := 0, 1
	if errs[0] != nil {
		won, lost = 1, 0
	}
	require.NoError(t, errs[won])
	require.Error(t, errs[lost], "two compactions of one log both succeeded")
	assert.ErrorIs(t, errs[lost], ErrConcurrentCompaction)
	var conflict *ConflictError
	require.ErrorAs(t, errs[lost], &conflict)
	assert.Equal(t, path, conflict.Path)
	assert.Equal(t, "compaction "+res[won].ID, conflict.Entry)
	lines := strings.Split(strings.TrimSpace(readFile(t, path)), "\n")
	require.Len(t, lines, conflict.Line, "the conflicting entry is the last line")
	assert.Contains(t, lines[conflict.Line-1], `"type":"compaction"`)

	back, err := e.LoadSession(path)
	require.NoError(t, err)
	require.Len(t, back.Compactions(), 1, "the refused compaction was written")
	assert.Equal(t, res[won].Summary, back.Compactions()[0].Summary)

	// The loser has read the winner's entry; its retry builds on it.
	sessions := []*Session{first, second}
	again, err := e.Compact(ctx, sessions[lost], CompactOptions{KeepRecentTokens: 500})
	require.NoError(t, err)
	assert.Equal(t, res[won].Summary, lastHistory(t, rec).PreviousSummary)
	back, err = e.LoadSession(path)
	require.NoError(t, err)
	require.Len(t, back.Compactions(), 2)
	assert.Equal(t, again.ID, back.Compactions()[1].ID)
	assert.NotEqual(t, res[won].ID, again.ID)
}

// A compaction on a handle opened before another handle's compaction
// builds on that one: the plan starts from the log as it is.
func TestSecondCompactionOfAnotherHandleBuildsOnTheFirst(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 1500}, WithStrategy("structured", rec))
	path := filepath.Join(t.TempDir(), "run.jsonl")
	a, err := e.OpenSession(path)
	require.NoError(t, err)
	coding(t, a, 6, 300)
	b, err := e.OpenSession(path)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close(); b.Close() })
	ca, err := e.Compact(ctx, a, CompactOptions{})
	require.NoError(t, err)
	cb, err := e.Compact(ctx, b, CompactOptions{KeepRecentTokens: 500})
	require.NoError(t, err)
	assert.NotEqual(t, ca.ID, cb.ID)
	assert.Equal(t, ca.Summary, lastHistory(t, rec).PreviousSummary)
	back, err := e.LoadSession(path)
	require.NoError(t, err)
	assert.Len(t, back.Compactions(), 2)

	// An undo from the other handle undoes the newest compaction.
	undone, err := a.Undo()
	require.NoError(t, err)
	assert.Equal(t, cb.ID, undone.ID)
}

// lastHistory is the latest request to summarize history (not a turn
// prefix, which has no previous summary).
func lastHistory(t *testing.T, rec *recorder) *abi.SummarizeRequest {
	t.Helper()
	reqs := rec.calls()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Kind == abi.FoldHistory {
			return reqs[i]
		}
	}
	require.Fail(t, "no history was summarized")
	return nil
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// A program that does not use the library appends a message: the
// session's next append goes after it, and the session knows it.
func TestRawWriterLineIsKept(t *testing.T) {
	e := newEngine(t, Config{})
	path := filepath.Join(t.TempDir(), "run.jsonl")
	s, err := e.OpenSession(path)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Append(user("first")))
	raw, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = raw.WriteString(`{"type":"message","message":{"id":"raw-1","role":"user","content":[{"type":"text","text":"from another program"}]}}` + "\n")
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	require.NoError(t, s.Append(user("ours")))

	ids := func(ms []Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	want := []string{"m1", "raw-1", "m2"}
	assert.Equal(t, want, ids(s.Messages()))
	back, err := e.LoadSession(path)
	require.NoError(t, err)
	assert.Equal(t, want, ids(back.Messages()))
}

// within fails the test if fn has not returned after d: a read that never
// ends must not hang the package.
func within(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		require.FailNow(t, fmt.Sprintf("still reading after %s", d))
	}
}

func TestSessionSizeLimit(t *testing.T) {
	e := newEngine(t, Config{}, WithMaxSessionBytes(64<<10))
	path := filepath.Join(t.TempDir(), "big.jsonl")
	s, err := e.OpenSession(path)
	require.NoError(t, err)
	for s.Len() < 100 {
		require.NoError(t, s.Append(user(filler("big", 300))))
	}
	require.NoError(t, s.Close())

	_, err = e.OpenSession(path)
	require.ErrorIs(t, err, ErrSessionTooLarge)
	assert.Contains(t, err.Error(), "WithMaxSessionBytes", "the error says how to raise the limit")
	_, err = e.LoadSession(path)
	assert.ErrorIs(t, err, ErrSessionTooLarge)
	within(t, 30*time.Second, func() {
		_, err = e.ReadSession(zeros{}, "stdin")
		assert.ErrorIs(t, err, ErrSessionTooLarge)
	})

	back, err := newEngine(t, Config{}, WithMaxSessionBytes(1<<20)).LoadSession(path)
	require.NoError(t, err, "a raised limit reads it")
	assert.Equal(t, 100, back.Len())
}

func TestReadSessionStopsWhenCancelled(t *testing.T) {
	e := newEngine(t, Config{})
	cctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	go func() {
		line := []byte(`{"type":"message","message":{"role":"user","content":[{"type":"text","text":"again"}]}}` + "\n")
		for i := 0; ; i++ {
			if i == 2000 {
				cancel()
			}
			if _, err := pw.Write(line); err != nil {
				return
			}
		}
	}()
	within(t, 30*time.Second, func() {
		_, err := e.ReadSessionContext(cctx, pr, "stdin")
		assert.ErrorIs(t, err, context.Canceled)
	})
	pr.Close()
}

// zeros is an endless reader of zero bytes, like /dev/zero.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Prunes replayed from the log give the same estimates as when they were
// made: replay sums the estimates once at the end.
func TestReplayedPrunesMatchLiveEstimates(t *testing.T) {
	e := newEngine(t, Config{KeepRecentTokens: 1500, PruneMinTokens: 200, PruneKeepTokens: 50})
	path := filepath.Join(t.TempDir(), "run.jsonl")
	s, err := e.OpenSession(path)
	require.NoError(t, err)
	coding(t, s, 6, 400)
	require.Positive(t, e.prune(s, 1000))
	coding(t, s, 1, 400)
	require.NoError(t, s.Close())

	back, err := e.LoadSession(path)
	require.NoError(t, err)
	assert.Equal(t, s.cum, back.cum)
	assert.Equal(t, s.ContextTokens(), back.ContextTokens())
	assert.Equal(t, s.Context(), back.Context())
}

func TestInvalidUTF8IsRefused(t *testing.T) {
	e := newEngine(t, Config{})
	dir := t.TempDir()
	good := `{"type":"message","message":{"id":"m1","role":"user","content":[{"type":"text","text":"hello"}]}}` + "\n"
	for name, line := range map[string]string{
		"bad byte":          `{"type":"message","message":{"id":"m2","role":"user","content":[{"type":"text","text":"caf` + "\xe9" + `"}]}}`,
		"lone high escape":  `{"type":"message","message":{"id":"m2","role":"user","content":[{"type":"text","text":"x\ud83d"}]}}`,
		"lone low escape":   `{"type":"message","message":{"id":"m2","role":"user","content":[{"type":"text","text":"\uDE00y"}]}}`,
		"high without pair": `{"type":"message","message":{"id":"m2","role":"user","content":[{"type":"text","text":"\ud83d\u0041"}]}}`,
		// In members the replay passes over or keeps as they are.
		"bad byte in an input":             `{"type":"message","message":{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"p":"` + "\xff" + `"}}]}}`,
		"lone escape in an input":          `{"type":"message","message":{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"p":"\udc00"}}]}}`,
		"lone escape in an unknown member": `{"type":"message","message":{"id":"m2","role":"user","content":[{"type":"text","text":"x"}],"note":["\ud83d"]}}`,
		"bad byte in a key":                `{"type":"message","message":{"id":"m2","role":"user","content":[{"type":"text","text":"x"}],"n` + "\xe9" + `":1}}`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".jsonl")
		require.NoError(t, os.WriteFile(path, []byte(good+line+"\n"), 0o644))
		_, err := e.OpenSession(path)
		require.ErrorIs(t, err, ErrInvalidUTF8, name)
		assert.ErrorIs(t, err, ErrBadEntry, name)
		var le *LineError
		require.ErrorAs(t, err, &le, name)
		assert.Equal(t, path, le.Path, name)
		assert.Equal(t, 2, le.Line, name)
		assert.Equal(t, good+line+"\n", readFile(t, path), "%s: the file changed", name)
	}

	// Escapes that are valid, a real U+FFFD and a text that spells a
	// \ufffd escape are kept exactly.
	path := filepath.Join(dir, "ok.jsonl")
	text := "pair \U0001F600, replacement \uFFFD, spelled \\ud83d and \\ufffd"
	line := `{"type":"message","message":{"id":"m2","role":"user","content":[{"type":"text","text":"pair \ud83d\ude00, replacement ` + "\uFFFD" + `, spelled \\ud83d and \\ufffd"}]}}`
	require.NoError(t, os.WriteFile(path, []byte(good+line+"\n"), 0o644))
	s, err := e.OpenSession(path)
	require.NoError(t, err)
	assert.Equal(t, text, s.Messages()[1].Content[0].Text)

	// Appending text that is not UTF-8 is refused and writes nothing.
	before := readFile(t, path)
	err = s.Append(user("caf\xe9"))
	assert.ErrorIs(t, err, ErrInvalidUTF8)
	err = s.Append(Message{Role: abi.RoleAssistant, Content: []Block{{Type: abi.BlockToolUse, ID: "t1", Name: "Read", Input: []byte("{\"p\":\"\xff\"}")}}})
	assert.ErrorIs(t, err, ErrInvalidUTF8)
	assert.Equal(t, before, readFile(t, path))
	assert.Equal(t, 2, s.Len())
	require.NoError(t, s.Append(user(text)))
	require.NoError(t, s.Close())
	back, err := e.LoadSession(path)
	require.NoError(t, err)
	assert.Equal(t, text, back.Messages()[2].Content[0].Text)
}

func TestAbsurdUsageIsRefused(t *testing.T) {
	e := newEngine(t, Config{})
	dir := t.TempDir()
	for name, usage := range map[string]string{
		"negative input":    `{"input_tokens":-5,"output_tokens":10}`,
		"over 2^40":         `{"input_tokens":2000000000000,"output_tokens":10}`,
		"negative cache":    `{"input_tokens":5,"output_tokens":10,"cache_read_tokens":-1}`,
		"over int64":        `{"input_tokens":1e300,"output_tokens":10}`,
		"not a count (NaN)": `{"input_tokens":"NaN","output_tokens":10}`,
	} {
		path := filepath.Join(dir, strings.NewReplacer(" ", "_", "^", "", "(", "", ")", "").Replace(name)+".jsonl")
		log := `{"type":"message","message":{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}]}}` + "\n" +
			`{"type":"message","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"hello"}],"usage":` + usage + `}}` + "\n"
		require.NoError(t, os.WriteFile(path, []byte(log), 0o644))
		_, err := e.LoadSession(path)
		require.ErrorIs(t, err, ErrBadEntry, name)
		var le *LineError
		require.ErrorAs(t, err, &le, name)
		assert.Equal(t, 2, le.Line, name)
		assert.Contains(t, err.Error(), fmt.Sprintf("%s:2:", path), name)
	}

	// Through the library, the reply is refused and calibration untouched.
	s := e.NewSession()
	require.NoError(t, s.Append(user("hi")))
	_, err := e.EnsureFits(ctx, s, Request{})
	require.NoError(t, err)
	for _, u := range []Usage{{InputTokens: -1}, {InputTokens: 1 << 41}, {OutputTokens: -3}} {
		reply := assistant("hello")
		reply.Usage = &u
		assert.ErrorIs(t, e.AppendReply(s, reply), ErrBadUsage)
		e.ObserveUsage(s, u)
	}
	_, samples := e.Calibration()
	assert.Zero(t, samples, "an absurd report reached calibration")
	assert.Equal(t, 1, s.Len())
}
