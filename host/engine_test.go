package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/internal/tokens"
	"github.com/compact-host/compact-host/host/plugin"
)

var ctx = context.Background()

func TestConfigDefaultsAndErrors(t *testing.T) {
	e, err := New(Config{Model: "claude-sonnet-4-5"})
	require.NoError(t, err)
	b := e.Budget()
	assert.Equal(t, 200000, b.ContextWindow, "budget %+v", b)
	assert.Equal(t, 136000, b.Input, "budget %+v", b)
	assert.Equal(t, 0.70, b.PruneAt, "budget %+v", b)
	assert.Equal(t, 0.95, b.EmergencyAt, "budget %+v", b)
	assert.InDelta(t, 0.75, b.CompactAt, 0.001, "compact point, want 0.85-0.10")
	assert.Equal(t, "chars/4", e.Tokenizer(), "claude tokenizer")
	gpt, err := New(Config{Model: "gpt-4o"})
	require.NoError(t, err)
	assert.Equal(t, "o200k", gpt.Tokenizer(), "gpt-4o tokenizer")
	floor, err := New(Config{ContextWindow: 1000, CompactThreshold: 0.15, OverheadReserve: 0.10})
	require.NoError(t, err)
	assert.Equal(t, 0.1, floor.Budget().CompactAt, "compact point floor")
	for name, cfg := range map[string]Config{
		"no model":        {},
		"unknown model":   {Model: "no-such-model"},
		"threshold range": {ContextWindow: 1000, PruneThreshold: 1.5},
		"emergency low":   {ContextWindow: 1000, EmergencyThreshold: 0.5},
		"bad tokenizer":   {ContextWindow: 1000, Tokenizer: "words"},
	} {
		_, err := New(cfg)
		assert.Error(t, err, name)
	}
}

func TestBelowThresholdDoesNothing(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{}, WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 2, 100)
	before := s.Context()
	d, err := e.EnsureFits(ctx, s, Request{ToolSchemaTokens: 500})
	require.NoError(t, err)
	require.Equal(t, ActionNone, d.Action, "decision %+v", d)
	require.True(t, d.Fits, "decision %+v", d)
	assert.Equal(t, s.ContextTokens()+500, d.TokensBefore, "overhead not counted")
	assert.Equal(t, before, s.Context(), "session changed below threshold")
	assert.Empty(t, rec.calls(), "session changed below threshold")
}

func TestPruneShortensOldToolResults(t *testing.T) {
	e := newEngine(t, Config{ContextWindow: 100000, MaxOutputTokens: 10000, PruneMinTokens: 500, KeepRecentTokens: 8000, CompactThreshold: 0.95, OverheadReserve: -1, EmergencyThreshold: 0.99},
		WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	coding(t, s, 6, 3000) // 18 results of 3000 tokens: ~60k tokens, 0.6 of budget
	require.NoError(t, s.Append(user("and now?")))
	var events []Event
	e.Subscribe(func(ev Event) { events = append(events, ev) })
	d, err := e.EnsureFits(ctx, s, Request{ToolSchemaTokens: 10000})
	require.NoError(t, err)
	require.Equal(t, ActionPruned, d.Action, "decision %+v", d)
	require.Less(t, d.TokensAfter, d.TokensBefore, "decision %+v", d)
	ctxMsgs := s.Context()
	require.NoError(t, Validate(ctxMsgs, false))
	// Old results are shortened with a notice; the newest ones are intact.
	first := ctxMsgs[2].Content[0].Text
	assert.Contains(t, first, "omitted to save context", "old result not pruned")
	assert.LessOrEqual(t, len(first), 2200, "old result not pruned")
	last := ctxMsgs[len(ctxMsgs)-4].Content[0]
	assert.Equal(t, abi.BlockToolResult, last.Type)
	assert.NotContains(t, last.Text, "omitted", "protected result was pruned")
	// The originals stay.
	assert.NotContains(t, s.Messages()[2].Content[0].Text, "omitted", "original message was changed")
	require.Len(t, events, 1)
	pe, ok := events[0].(*PruneEvent)
	require.True(t, ok, "prune event %+v", events[0])
	assert.NotZero(t, pe.Results, "prune event %+v", pe)
	assert.Less(t, pe.TokensAfter, pe.TokensBefore, "prune event %+v", pe)
}

func TestDisablePruneLeavesToolResultsAlone(t *testing.T) {
	e := newEngine(t, Config{ContextWindow: 100000, MaxOutputTokens: 10000, PruneMinTokens: 500, KeepRecentTokens: 8000, CompactThreshold: 0.95, OverheadReserve: -1, EmergencyThreshold: 0.99, DisablePrune: true},
		WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	coding(t, s, 6, 3000) // over the prune threshold, as in TestPruneShortensOldToolResults
	require.NoError(t, s.Append(user("and now?")))
	d, err := e.EnsureFits(ctx, s, Request{ToolSchemaTokens: 10000})
	require.NoError(t, err)
	assert.Equal(t, ActionNone, d.Action, "decision %+v", d)
	for _, m := range s.Context() {
		for _, b := range m.Content {
			assert.NotContains(t, b.Text, "omitted to save context", "a result was pruned")
		}
	}
}

func TestCompactionSplicesVerifiesAndUndoes(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 3000}, WithStrategy("structured", rec))
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s, err := e.OpenSession(path)
	require.NoError(t, err)
	require.NoError(t, s.Append(Message{Role: abi.RoleSystem, Pinned: true, Content: []Block{{Type: abi.BlockText, Text: "You are careful."}}}))
	coding(t, s, 5, 950)
	original := s.Context()
	var got []*CompactionEvent
	e.Subscribe(func(ev Event) {
		if c, ok := ev.(*CompactionEvent); ok {
			got = append(got, c)
		}
	})
	d, err := e.EnsureFits(ctx, s, Request{})
	require.NoError(t, err)
	require.Equal(t, ActionCompacted, d.Action, "decision %+v", d)
	require.Less(t, d.TokensAfter, d.TokensBefore, "decision %+v", d)
	require.True(t, d.Fits, "decision %+v", d)
	after := s.Context()
	require.NoError(t, Validate(after, false))
	assert.Equal(t, abi.RoleSystem, after[0].Role, "pinned system message not first")
	assert.True(t, after[0].Pinned, "pinned system message not first")
	sum := after[1]
	require.True(t, sum.Summary, "summary message %+v", sum)
	require.Equal(t, abi.RoleUser, sum.Role, "summary message %+v", sum)
	require.Contains(t, sum.Content[0].Text, "SUMMARY(history)")
	// The strategy did not name files; verification appended them.
	assert.Contains(t, sum.Content[0].Text, "## Modified Files", "modified files not appended")
	assert.Contains(t, sum.Content[0].Text, "pkg0/edit0.go", "modified files not appended")
	reqs := rec.calls()
	require.NotEmpty(t, reqs)
	require.Equal(t, abi.FoldHistory, reqs[0].Kind, "requests %+v", reqs)
	require.False(t, reqs[0].ModelAvailable, "requests %+v", reqs)
	assert.NotEmpty(t, reqs[0].FileOps.Modified, "request lacks file ops")
	assert.Positive(t, reqs[0].TargetTokens, "request lacks a target")
	for _, m := range reqs[0].Messages {
		assert.False(t, m.Pinned, "pinned message sent for folding")
	}
	require.Len(t, got, 1, "events %+v", got)
	require.Equal(t, "structured", got[0].Strategy, "events %+v", got)
	require.Less(t, got[0].TokensAfter, got[0].TokensBefore, "events %+v", got)
	require.NotZero(t, got[0].MessagesFolded, "events %+v", got)
	require.True(t, got[0].Offline, "events %+v", got)

	// Reopening the log reproduces the view.
	require.NoError(t, s.Close())
	s2, err := e.OpenSession(path)
	require.NoError(t, err)
	require.Equal(t, after, s2.Context(), "reopened session differs")
	// Undo restores the original context exactly, and survives a reopen.
	c, err := s2.Undo()
	require.NoError(t, err)
	require.Equal(t, "c1", c.ID)
	require.Equal(t, original, s2.Context(), "undo did not restore the original context")
	require.NoError(t, s2.Close())
	s3, err := e.OpenSession(path)
	require.NoError(t, err)
	require.Equal(t, original, s3.Context(), "undo lost on reopen")
	_, err = s3.Undo()
	assert.ErrorIs(t, err, ErrNothingToUndo, "second undo")
}

func TestSecondCompactionMergesPreviousSummary(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 5, 600)
	_, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	coding(t, s, 3, 600)
	_, err = e.Compact(ctx, s, CompactOptions{Focus: "the auth bug"})
	require.NoError(t, err)
	var last *abi.SummarizeRequest
	for _, r := range rec.calls() {
		if r.Kind == abi.FoldHistory {
			last = r
		}
	}
	require.NotNil(t, last)
	require.Contains(t, last.PreviousSummary, "SUMMARY(history)", "second request")
	require.Equal(t, "the auth bug", last.Focus, "second request")
	for _, m := range last.Messages {
		assert.False(t, m.Summary, "previous summary message re-sent as a message to fold")
	}
	require.NoError(t, Validate(s.Context(), false))
	require.Len(t, s.Compactions(), 2)
	_, err = s.Undo()
	require.NoError(t, err)
	assert.Contains(t, s.Context()[0].Content[0].Text, "SUMMARY(history) of", "undo of the second compaction should bring back the first")
}

func TestCutKeepsParallelResultsWithTheirCalls(t *testing.T) {
	e := newEngine(t, Config{KeepRecentTokens: 10, MinKeepMessages: 1}, WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	require.NoError(t, s.Append(user("go")))
	require.NoError(t, s.Append(assistant("", call("a", "Bash", map[string]any{"command": "ls"}), call("b", "Bash", map[string]any{"command": "pwd"}), call("c", "Bash", map[string]any{"command": "id"}))))
	require.NoError(t, s.Append(results(result("a", filler("a", 500)))))
	require.NoError(t, s.Append(results(result("b", filler("b", 500)))))
	require.NoError(t, s.Append(results(result("c", filler("c", 500)))))
	// Only the cut after message 4 or before message 1 is valid.
	for i, want := range []bool{true, true, false, false, false} {
		assert.Equal(t, want, s.cutAt(i), "cutAt(%d)", i)
	}
	assert.True(t, s.cutAt(5), "end is a valid cut when every call is answered")
	require.NoError(t, s.Append(assistant("", call("d", "Bash", map[string]any{"command": "make"}))))
	assert.False(t, s.cutAt(6), "end is not a valid cut while a call waits")
	assert.Equal(t, 5, s.findCut(0, 10, 1), "findCut, want before the waiting call")
	require.NoError(t, s.Append(results(result("d", "ok"))))
	_, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	require.NoError(t, Validate(s.Context(), false))
}

func TestCutInsideLongTurnFoldsPrefixSeparately(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", rec))
	s := e.NewSession()
	require.NoError(t, s.Append(user("first task")))
	require.NoError(t, s.Append(assistant("done")))
	require.NoError(t, s.Append(user("second task: a long one")))
	for i := 0; i < 12; i++ {
		id := "x" + string(rune('a'+i))
		require.NoError(t, s.Append(assistant("step", call(id, "Bash", map[string]any{"command": "make test"}))))
		require.NoError(t, s.Append(results(result(id, filler("out", 600)))))
	}
	_, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	reqs := rec.calls()
	require.Len(t, reqs, 2, "want a history and a turn-prefix request")
	require.Equal(t, abi.FoldHistory, reqs[0].Kind)
	require.Equal(t, abi.FoldTurnPrefix, reqs[1].Kind)
	assert.Equal(t, "first task", reqs[0].Messages[0].Content[0].Text, "history and prefix split at the wrong place")
	prefixRequest, _ := abi.RequestText(reqs[1].Messages[0])
	assert.Equal(t, "second task: a long one", prefixRequest, "history and prefix split at the wrong place")
	ctxMsgs := s.Context()
	require.NoError(t, Validate(ctxMsgs, false))
	text := ctxMsgs[0].Content[0].Text
	assert.Empty(t, reqs[0].PreviousSummary, "history folded with a previous summary")
	assert.Contains(t, text, "SUMMARY(turn_prefix)", "summary lacks the turn prefix")
	assert.Contains(t, reqs[1].PreviousSummary, "SUMMARY(history)", "the turn prefix does not merge the history's summary")
	assert.Contains(t, text, "second task: a long one", "summary lacks the active request")
	assert.Equal(t, abi.RoleAssistant, ctxMsgs[1].Role, "kept part starts with the wrong role")
}

func TestPinnedMessagesAreNeverFolded(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 1000}, WithStrategy("structured", rec))
	s := e.NewSession()
	require.NoError(t, s.Append(user("start")))
	require.NoError(t, s.Append(Message{Role: abi.RoleUser, Pinned: true, Content: []Block{{Type: abi.BlockText, Text: "PLAN: never touch prod"}}}))
	coding(t, s, 4, 500)
	_, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	found := false
	for _, m := range s.Context() {
		if m.Pinned && m.Content[0].Text == "PLAN: never touch prod" {
			found = true
		}
	}
	require.True(t, found, "pinned message lost")
	for _, r := range rec.calls() {
		for _, m := range r.Messages {
			require.False(t, m.Pinned, "pinned message folded")
		}
	}
}

func TestFallbackChainAndEmergency(t *testing.T) {
	bad := &recorder{fail: errors.New("model exploded")}
	empty := StrategyFunc(func(context.Context, pluginServices, *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		return &abi.SummarizeResponse{Summary: "  "}, nil
	})
	good := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000, Fallbacks: []string{"narrative", "truncate"}},
		WithStrategy("structured", bad), WithStrategy("narrative", empty), WithStrategy("truncate", good))
	var falls []*FallbackEvent
	e.Subscribe(func(ev Event) {
		if f, ok := ev.(*FallbackEvent); ok {
			falls = append(falls, f)
		}
	})
	s := e.NewSession()
	coding(t, s, 4, 600)
	c, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	require.Equal(t, "truncate", c.Strategy)
	require.Len(t, falls, 2, "fallbacks %+v", falls)
	require.Equal(t, "narrative", falls[0].To)
	require.ErrorIs(t, falls[1].Err, ErrEmptySummary)

	// Every strategy failing ends on the emergency path, which always works.
	good.fail = errors.New("also broken")
	coding(t, s, 4, 600)
	c, err = e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	require.True(t, c.Emergency, "got %+v", c)
	require.Equal(t, StrategyEmergency, c.Strategy)
	require.NoError(t, Validate(s.Context(), false))
	assert.Contains(t, s.Context()[0].Content[0].Text, "emergency", "emergency notice missing")
}

// pluginServices shortens the signature in test literals.
type pluginServices = plugin.Services

func TestBreakerOpensAfterConsecutiveFailures(t *testing.T) {
	bad := &recorder{fail: errors.New("down")}
	e := newEngine(t, Config{KeepRecentTokens: 1000, Fallbacks: []string{"truncate"}, BreakerFailures: 3, BreakerCooldown: time.Hour},
		WithStrategy("structured", bad), WithStrategy("truncate", &recorder{}))
	for i := 0; i < 5; i++ {
		s := e.NewSession()
		coding(t, s, 3, 500)
		_, err := e.Compact(ctx, s, CompactOptions{})
		require.NoError(t, err)
	}
	require.Len(t, bad.calls(), 3, "failing strategy calls, want 3 before the breaker opened")
}

func TestVerificationAppendsLatestRequest(t *testing.T) {
	e := newEngine(t, Config{KeepRecentTokens: 1500}, WithStrategy("structured", StrategyFunc(func(context.Context, pluginServices, *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		return &abi.SummarizeResponse{Summary: "Worked on things."}, nil
	})))
	s := e.NewSession()
	require.NoError(t, s.Append(user("Refactor the parser in internal/parse so that errors carry line numbers")))
	for i := 0; i < 10; i++ {
		id := "c" + string(rune('a'+i))
		require.NoError(t, s.Append(assistant("", call(id, "Write", map[string]any{"file_path": "internal/parse/p" + string(rune('a'+i)) + ".go", "content": "x"}))))
		require.NoError(t, s.Append(results(result(id, filler("w", 400)))))
	}
	_, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	text := s.Context()[0].Content[0].Text
	for _, want := range []string{"Refactor the parser in internal/parse so that errors carry line numbers", "internal/parse/pa.go", "## Modified Files"} {
		assert.Contains(t, text, want)
	}
}

func TestChunksWhenFoldedHistoryExceedsSummarizerWindow(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{ContextWindow: 200000, MaxOutputTokens: 8000, KeepRecentTokens: 2000, SummarizerBudget: 8000, SummaryTokens: 1000},
		WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 20, 1500)
	_, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	reqs := rec.calls()
	require.GreaterOrEqual(t, len(reqs), 2, "the history should have been chunked")
	for i, r := range reqs {
		n := 0
		for j := range r.Messages {
			n += e.CountTokens(r.Messages[j].Content[0].Text)
		}
		assert.LessOrEqual(t, n, 8000, "request %d is over the summarizer budget", i)
		if i > 0 && r.Kind == abi.FoldHistory {
			assert.Contains(t, r.PreviousSummary, "SUMMARY", "chunk %d does not merge the previous chunk's summary", i)
		}
	}
}

func TestCalibrationAndSilentOverflow(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 1, 200)
	for i := 0; i < 3; i++ {
		e.EnsureFits(ctx, s, Request{})
		reported := s.ContextTokens() * 13 / 10 // the provider counts 30% more
		require.NoError(t, e.AppendReply(s, Message{Role: abi.RoleAssistant, Content: []Block{{Type: abi.BlockText, Text: "ok"}}, Usage: &Usage{InputTokens: reported - 100, CacheReadTokens: 100}}))
		require.NoError(t, s.Append(user("more")))
	}
	f, n := e.Calibration()
	require.Equal(t, 3, n, "reports")
	require.InDelta(t, 1.30, f, 0.02, "factor")
	// Usage above the window forces a compaction at the next check.
	coding(t, s, 3, 300)
	e.EnsureFits(ctx, s, Request{})
	require.NoError(t, e.AppendReply(s, Message{Role: abi.RoleAssistant, Content: []Block{{Type: abi.BlockText, Text: "ok"}}, Usage: &Usage{InputTokens: 25000}}))
	d, err := e.EnsureFits(ctx, s, Request{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, d.Action, ActionCompacted, "silent overflow did not force compaction: %+v", d)
}

func TestEmergencyPathAtThreshold(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{ContextWindow: 20000, MaxOutputTokens: 2000, PruneMinTokens: 100000, EmergencyKeepMessages: 4}, WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 3, 1950) // over 0.95 of the 18k budget
	d, err := e.EnsureFits(ctx, s, Request{})
	require.NoError(t, err)
	require.Equal(t, ActionEmergency, d.Action, "decision %+v", d)
	require.True(t, d.Fits, "decision %+v", d)
	assert.Empty(t, rec.calls(), "the emergency path called a strategy")
	require.NoError(t, Validate(s.Context(), false))
}

func TestDisabledCompactionOnlyMeasures(t *testing.T) {
	e := newEngine(t, Config{DisableCompaction: true, PruneMinTokens: 100000}, WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	coding(t, s, 4, 1800)
	d, err := e.EnsureFits(ctx, s, Request{})
	require.NoError(t, err)
	require.Equal(t, ActionNone, d.Action, "decision %+v", d)
	require.False(t, d.Fits, "decision %+v", d)
}

func TestOpenSessionReportsBadLineAndTornTail(t *testing.T) {
	e := newEngine(t, Config{})
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"type":"message","message":{"role":"user","content":[]}}`+"\n"+`{"type":"wat"}`+"\n"), 0o644))
	_, err := e.OpenSession(bad)
	require.Error(t, err)
	require.Contains(t, err.Error(), "bad.jsonl:2")
	require.Contains(t, err.Error(), "unknown entry type")
	torn := filepath.Join(dir, "torn.jsonl")
	require.NoError(t, os.WriteFile(torn, []byte(`{"type":"message","message":{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}]}}`+"\n"+`{"type":"mess`), 0o644))
	s, err := e.OpenSession(torn)
	require.NoError(t, err)
	require.NotNil(t, s.Torn())
	require.Equal(t, 1, s.Len())
	require.NoError(t, s.Append(user("next")))
	require.NoError(t, s.Close())
	s2, err := e.OpenSession(torn)
	require.NoError(t, err)
	require.Equal(t, 2, s2.Len(), "after repair")
	require.Nil(t, s2.Torn(), "after repair")
}

func TestDuplicateIDRejected(t *testing.T) {
	s := newEngine(t, Config{}).NewSession()
	require.NoError(t, s.Append(Message{ID: "a", Role: abi.RoleUser}))
	require.ErrorIs(t, s.Append(Message{ID: "a", Role: abi.RoleUser}), ErrDuplicateID)
}

func TestPlanInspectAndWriteLog(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 6, 700)
	p, err := e.Plan(s, CompactOptions{})
	require.NoError(t, err)
	require.NotZero(t, p.Folded, "plan %+v", p)
	require.NotZero(t, p.Kept, "plan %+v", p)
	require.Equal(t, s.Len(), p.Folded+p.Kept, "plan %+v", p)
	require.GreaterOrEqual(t, p.TokensKept, 2000, "plan %+v", p)
	require.Less(t, p.TokensKept, p.TokensBefore, "plan %+v", p)
	require.Empty(t, rec.calls(), "planning called the strategy")
	b := e.Inspect(s, 3)
	require.Equal(t, s.ContextTokens(), b.Tokens, "breakdown %+v", b)
	require.Len(t, b.Largest, 3, "breakdown %+v", b)
	require.Equal(t, "Read", b.Largest[0].Tool, "breakdown %+v", b)
	require.Greater(t, b.ByRole.ToolResults, b.ByRole.User, "breakdown %+v", b)
	assert.GreaterOrEqual(t, b.CrossedPrune, 0, "threshold crossings %+v", b)
	assert.GreaterOrEqual(t, b.CrossedCompact, b.CrossedPrune, "threshold crossings %+v", b)
	d, err := e.EnsureFits(ctx, s, Request{})
	require.NoError(t, err)
	require.NotEqual(t, ActionNone, d.Action, "setup: no action")
	c, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, c.FoldedThrough, "no compaction")
	path := filepath.Join(t.TempDir(), "copy.jsonl")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, s.WriteLog(f))
	require.NoError(t, f.Close())
	s2, err := e.LoadSession(path)
	require.NoError(t, err)
	require.Equal(t, s.Context(), s2.Context(), "log copy reads back to a different context")
}

// fakeModel answers every completion and reports a prompt 40% larger than
// chars/4 counts, half of it from the cache.
type fakeModel struct{ name string }

func (f fakeModel) Model() string { return f.name }

func (f fakeModel) Complete(_ context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	est := (len(req.System) + 3) / 4
	for i := range req.Messages {
		est += tokens.Message(tokens.Chars(), &req.Messages[i])
	}
	n := est * 14 / 10
	return &abi.CompleteResponse{Text: "summary by the model", Model: f.name, Usage: abi.Usage{InputTokens: n / 2, CacheReadTokens: n - n/2, OutputTokens: 10}}, nil
}

func TestSummarizerUsageCalibratesTheSameModel(t *testing.T) {
	asks := StrategyFunc(func(ctx context.Context, svc pluginServices, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		resp, err := svc.Complete(ctx, &abi.CompleteRequest{System: "Summarize.", Messages: req.Messages})
		if err != nil {
			return nil, err
		}
		return &abi.SummarizeResponse{Summary: resp.Text}, nil
	})
	for _, tc := range []struct {
		model      string
		calibrated bool
	}{{"claude-sonnet-4-5", true}, {"claude-haiku-4-5", false}} {
		e := newEngine(t, Config{Model: "claude-sonnet-4-5", Tokenizer: "chars", KeepRecentTokens: 2000},
			WithStrategy("structured", asks), WithModel(fakeModel{tc.model}))
		var ev *CompactionEvent
		e.Subscribe(func(x Event) {
			if c, ok := x.(*CompactionEvent); ok {
				ev = c
			}
		})
		s := e.NewSession()
		coding(t, s, 4, 600)
		_, err := e.Compact(ctx, s, CompactOptions{})
		require.NoError(t, err)
		f, n := e.Calibration()
		if tc.calibrated {
			assert.NotZero(t, n, "%s: reports", tc.model)
			assert.InDelta(t, 1.4, f, 0.01, "%s: factor", tc.model)
		} else {
			assert.Zero(t, n, "%s: another model's usage calibrated the engine", tc.model)
		}
		if assert.NotNil(t, ev, "%s: no compaction event", tc.model) {
			assert.NotZero(t, ev.ModelUsage.CacheReadTokens, "%s: event lacks usage", tc.model)
			assert.Positive(t, ev.CostUSD, "%s: event lacks cost", tc.model)
			assert.False(t, ev.Offline, "%s: event says offline", tc.model)
		}
	}
}

// A provider that counts exactly what the engine estimates must leave the
// calibration at 1 across compactions: the report after a gate that acted
// is paired with the context as the gate left it.
func TestCalibrationStaysRightAcrossCompactions(t *testing.T) {
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	compactions := 0
	for turn := 0; turn < 12; turn++ {
		coding(t, s, 1, 500)
		d, err := e.EnsureFits(ctx, s, Request{ToolSchemaTokens: 300})
		require.NoError(t, err)
		if d.Action >= ActionCompacted {
			compactions++
		}
		reported := s.ContextTokens() + 300
		require.NoError(t, e.AppendReply(s, Message{Role: abi.RoleAssistant, Content: []Block{{Type: abi.BlockText, Text: "next"}}, Usage: &Usage{InputTokens: reported}}))
		require.NoError(t, s.Append(user("go on")))
	}
	require.NotZero(t, compactions, "setup: no compaction happened")
	f, n := e.Calibration()
	require.Equal(t, 12, n, "reports")
	require.InDelta(t, 1, f, 0.001, "factor after %d compactions", compactions)
	require.Zero(t, e.CalibrationOffset(), "offset after %d compactions", compactions)
}

func TestPluginCompletionsAreClampedToTheSummarizingModel(t *testing.T) {
	e := newEngine(t, Config{Model: "claude-sonnet-4-5", Tokenizer: "chars"}, WithModel(fakeModel{"claude-haiku-4-5"}))
	want, ok := catalog.Lookup("claude-haiku-4-5")
	require.True(t, ok)
	require.Positive(t, want.MaxOutput)
	// The plugin registry clamps max_tokens through this method (plugin.OutputLimiter).
	var limiter interface{ MaxOutputTokens() int } = &services{e: e}
	assert.Equal(t, want.MaxOutput, limiter.MaxOutputTokens())
	offline := newEngine(t, Config{Model: "claude-sonnet-4-5", Tokenizer: "chars"})
	assert.Zero(t, (&services{e: offline}).MaxOutputTokens(), "no model, no limit of its own")
}
