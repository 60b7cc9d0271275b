package host

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// compactions collects the compaction events of e.
func compactions(e *Engine) *[]*CompactionEvent {
	var got []*CompactionEvent
	e.Subscribe(func(ev Event) {
		if c, ok := ev.(*CompactionEvent); ok {
			got = append(got, c)
		}
	})
	return &got
}

func pinnedSystem(tokens int) Message {
	return Message{Role: abi.RoleSystem, Pinned: true, Content: []Block{{Type: abi.BlockText, Text: filler("rules", tokens)}}}
}

// A kept tail that is nearly the whole history leaves little to fold: the
// gate does not compact for it.
func TestGateDoesNotCompactWhatCanFreeLittle(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{ContextWindow: 12000, MaxOutputTokens: 1000, KeepRecentTokens: 9000, MinKeepMessages: 1, PruneMinTokens: 100000},
		WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 5, 550)
	d, err := e.EnsureFits(ctx, s, Request{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, float64(d.TokensBefore), e.Budget().CompactAt*float64(d.Budget), "the test needs the compaction point: %+v", d)
	assert.Equal(t, ActionNone, d.Action, "%+v", d)
	assert.True(t, d.Fits, "%+v", d)
	assert.Empty(t, rec.calls(), "a strategy was called for a compaction that could free little")
}

// The agent's loop with a pinned system prompt that takes most of the
// budget: pinned part and kept tail alone sit above the compaction point,
// so each compaction leaves the context there. The gate compacts only when
// enough new history can be folded: every compaction frees what it
// promises, none follows another without the session growing, and a
// check with nothing new does nothing.
func TestPinnedPartDominatesNoCompactionLoop(t *testing.T) {
	// A summary of fixed size, as a model asked for a target size writes.
	short := StrategyFunc(func(context.Context, pluginServices, *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		return &abi.SummarizeResponse{Summary: "The user asked for each package to be read; every one was."}, nil
	})
	e := newEngine(t, Config{ContextWindow: 20000, MaxOutputTokens: 2000, PruneMinTokens: 100000}, WithStrategy("structured", short))
	got := compactions(e)
	s := e.NewSession()
	// 9,000 pinned and the default kept tail of 4,500 are the whole
	// compaction point (13,500 of the 18,000 budget).
	must(t, s.Append(pinnedSystem(9000)))
	b := e.Budget()
	require.GreaterOrEqual(t, 9000+e.cfg.KeepRecentTokens, int(b.CompactAt*float64(b.Input)), "the pinned part and the kept tail must sit over the compaction point")

	grownAt := []int{}
	checks := 0
	gate := func() {
		t.Helper()
		n := len(*got)
		d, err := e.EnsureFits(ctx, s, Request{})
		require.NoError(t, err)
		checks++
		if len(*got) > n {
			grownAt = append(grownAt, s.cum[len(s.msgs)])
			// Nothing new: the next check leaves the session alone.
			for range 3 {
				d2, err := e.EnsureFits(ctx, s, Request{})
				require.NoError(t, err)
				require.Equal(t, ActionNone, d2.Action, "a check with nothing new after %+v", d)
			}
			require.Len(t, *got, n+1, "compacted again without new content")
		}
	}
	for turn := range 30 {
		must(t, s.Append(user(fmt.Sprintf("turn %d: look at pkg%d", turn, turn))))
		id := fmt.Sprintf("t%d", turn)
		must(t, s.Append(assistant("Reading.", call(id, "Read", map[string]any{"file_path": fmt.Sprintf("pkg%d/a.go", turn)}))))
		must(t, s.Append(results(result(id, filler("read", 300)))))
		gate()
		must(t, s.Append(assistant(fmt.Sprintf("Turn %d done.", turn))))
	}
	require.NotEmpty(t, *got, "the session outgrew the budget; it must have compacted")
	for i, c := range *got {
		assert.Positive(t, c.MessagesFolded, "compaction %d folded nothing", i)
		assert.False(t, c.Emergency, "compaction %d: the summarizing compaction should act before the emergency threshold", i)
		assert.GreaterOrEqual(t, float64(c.TokensBefore-c.TokensAfter), 0.03*float64(c.TokensBefore),
			"compaction %d freed under 3%%: %d -> %d", i, c.TokensBefore, c.TokensAfter)
	}
	// Between two compactions the session grew by at least a share of
	// the budget: no compaction at every check.
	for i := 1; i < len(grownAt); i++ {
		assert.GreaterOrEqual(t, grownAt[i]-grownAt[i-1], int(0.05*float64(b.Input)),
			"compactions %d and %d: the session grew by %d tokens between them", i-1, i, grownAt[i]-grownAt[i-1])
	}
	assert.Less(t, len(*got), checks/4, "%d compactions in %d checks", len(*got), checks)
}

// A compaction whose summary eats most of what it folds frees little: the
// gate does not compact again until the session has grown by MinSavings of
// the budget, however many small messages arrive.
func TestBackoffAfterCompactionThatFreedLittle(t *testing.T) {
	calls := 0
	// A summary almost as large as what it replaces.
	bloated := StrategyFunc(func(_ context.Context, _ pluginServices, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		calls++
		n := len(req.PreviousSummary)
		for _, m := range req.Messages {
			for _, b := range m.Content {
				n += len(b.Text) + len(b.Input)
			}
		}
		return &abi.SummarizeResponse{Summary: filler("gist", n*95/100/4)}, nil
	})
	// Compaction at 60% of the budget, so that room is left between it
	// and the emergency threshold for the session to grow.
	e := newEngine(t, Config{ContextWindow: 40000, MaxOutputTokens: 4000, CompactThreshold: 0.6, OverheadReserve: -1,
		KeepRecentTokens: 16000, SummaryTokens: 6000, PruneMinTokens: 100000}, WithStrategy("structured", bloated))
	got := compactions(e)
	s := e.NewSession()
	coding(t, s, 14, 600)
	d, err := e.EnsureFits(ctx, s, Request{})
	require.NoError(t, err)
	require.Equal(t, ActionCompacted, d.Action, "first check: %+v", d)
	require.Less(t, float64(d.TokensBefore-d.TokensAfter), 0.10*float64(d.TokensBefore), "the test needs a compaction that freed little: %+v", d)
	require.GreaterOrEqual(t, float64(d.TokensAfter), e.Budget().CompactAt*float64(d.Budget), "the test needs the context left at the compaction point: %+v", d)
	require.Len(t, *got, 1)
	first := calls

	// Small messages: each check would see something new to fold.
	for i := range 6 {
		must(t, s.Append(user(fmt.Sprintf("one more thing, number %d, to look at later", i))))
		d, err = e.EnsureFits(ctx, s, Request{})
		require.NoError(t, err)
		require.Equal(t, ActionNone, d.Action, "small message %d: %+v", i, d)
	}
	require.Equal(t, first, calls, "compaction repeated before the session grew")
	require.Len(t, *got, 1)

	// A turn's worth of new history (over a tenth of the budget) ends the
	// wait.
	coding(t, s, 2, 600)
	d, err = e.EnsureFits(ctx, s, Request{})
	require.NoError(t, err)
	require.Equal(t, ActionCompacted, d.Action, "after the session grew: %+v", d)
	require.Greater(t, calls, first)
	require.Len(t, *got, 2)
}

// A strategy whose summary is not smaller falls to the emergency path,
// which must not stand in with a fold of pinned messages alone or a
// notice larger than what it drops: nothing is spliced, no compaction is
// reported, and the error says why.
func TestEmergencyNeverFoldsNothing(t *testing.T) {
	bloated := StrategyFunc(func(_ context.Context, _ pluginServices, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		return &abi.SummarizeResponse{Summary: filler("bloat", 5000)}, nil
	})
	e := newEngine(t, Config{ContextWindow: 200000, MaxOutputTokens: 2000, KeepRecentTokens: 1, MinKeepMessages: 1, Fallbacks: []string{}},
		WithStrategy("structured", bloated))
	got := compactions(e)
	s := e.NewSession()
	// The sample session's opening: rules, a request, a search.
	must(t, s.Append(Message{Role: abi.RoleSystem, Pinned: true, Content: []Block{{Type: abi.BlockText, Text: "You are a careful coding agent."}}}))
	must(t, s.Append(user("The ledger double-counts refunds when a payment is partially refunded twice. Find the bug and fix it.")))
	must(t, s.Append(assistant("Searching.", call("g1", "Grep", map[string]any{"pattern": "Refund"}))))
	must(t, s.Append(results(result("g1", "refund.go:14: func ApplyRefund"))))
	must(t, s.Append(assistant("Continuing.")))
	before := s.Context()

	_, err := e.Compact(ctx, s, CompactOptions{})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNothingToFold)
	assert.ErrorIs(t, err, ErrSummaryNotSmaller, "the strategy's failure is part of the error")
	assert.Contains(t, err.Error(), "emergency")
	assert.Empty(t, *got, "a compaction was reported")
	assert.Empty(t, s.Compactions())
	assert.Equal(t, before, s.Context(), "the session changed")

	// Only pinned messages before the newest: the emergency path finds
	// nothing it may drop.
	s = e.NewSession()
	must(t, s.Append(pinnedSystem(200)))
	must(t, s.Append(user("hello")))
	_, err = e.emergency(s, s.ContextTokens(), 0, 1)
	assert.ErrorIs(t, err, ErrNothingToFold)
	assert.Empty(t, *got)
}

// When the pinned part alone is over the budget, the gate can do nothing:
// it says so with Fits false, no action and no error, and reports no
// compaction.
func TestGateReportsAContextThatCannotFit(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{ContextWindow: 20000, MaxOutputTokens: 2000}, WithStrategy("structured", rec))
	got := compactions(e)
	s := e.NewSession()
	must(t, s.Append(pinnedSystem(19000)))
	must(t, s.Append(user("hello")))
	must(t, s.Append(assistant("Hi.")))
	must(t, s.Append(user("fix the bug")))
	d, err := e.EnsureFits(ctx, s, Request{})
	require.NoError(t, err)
	assert.Equal(t, ActionNone, d.Action, "%+v", d)
	assert.False(t, d.Fits, "%+v", d)
	assert.Greater(t, d.TokensAfter, d.Budget, "%+v", d)
	for _, c := range *got {
		assert.Positive(t, c.MessagesFolded, "a compaction folded nothing: %+v", c)
		assert.Less(t, c.TokensAfter, c.TokensBefore, "a compaction grew the context: %+v", c)
	}
}

// The emergency path keeps fewer than EmergencyKeepMessages when those
// would leave the context at the compaction point, and never fewer than
// MinKeepMessages.
func TestEmergencyKeepsFewerWhenTheNewestDoNotFit(t *testing.T) {
	e := newEngine(t, Config{ContextWindow: 20000, MaxOutputTokens: 2000, PruneMinTokens: 100000, EmergencyKeepMessages: 8},
		WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	must(t, s.Append(user("read every part")))
	for i := range 6 {
		id := fmt.Sprintf("r%d", i)
		must(t, s.Append(assistant("Reading.", call(id, "Read", map[string]any{"file_path": fmt.Sprintf("part%d.txt", i)}))))
		must(t, s.Append(results(result(id, filler("part", 3600)))))
	}
	b := e.Budget()
	require.GreaterOrEqual(t, float64(s.ContextTokens()), b.EmergencyAt*float64(b.Input))
	d, err := e.EnsureFits(ctx, s, Request{})
	require.NoError(t, err)
	require.Equal(t, ActionEmergency, d.Action, "%+v", d)
	assert.Less(t, float64(d.TokensAfter), b.CompactAt*float64(b.Input), "the emergency left the context at the compaction point: %+v", d)
	kept := 0
	for _, m := range s.Context() {
		if !m.Summary {
			kept++
		}
	}
	assert.GreaterOrEqual(t, kept, e.cfg.MinKeepMessages)
	assert.Less(t, kept, 8, "the newest eight were kept though they do not fit")
	require.NoError(t, Validate(s.Context(), false))
	assert.Contains(t, contextText(s), "read every part", "the latest request was dropped")
}

// contextText is the text of the session's context.
func contextText(s *Session) string {
	var b strings.Builder
	for _, m := range s.Context() {
		for _, bl := range m.Content {
			b.WriteString(bl.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// The default summary size is a twentieth of the budget from 60,000 on, and
// more below (an eighth up to 3,000, never under 1,000); with the kept recent
// messages it leaves the context well under its compaction point, so a
// compaction there still frees far more than MinSavings of the request.
func TestDefaultSummaryTokensScaleWithBudget(t *testing.T) {
	for _, tc := range []struct{ window, summary int }{
		{8000, 1000}, {16000, 1500}, {32000, 3000}, {64000, 3000}, {128000, 5990}, {200000, 8000}, {1000000, 8000},
	} {
		e := newEngine(t, Config{ContextWindow: tc.window})
		b := e.Budget()
		assert.Equal(t, tc.summary, b.SummaryTokens, "window %d, budget %d", tc.window, b.Input)
		compactAt := int(b.CompactAt * float64(b.Input))
		after := b.KeepRecentTokens + b.SummaryTokens
		freed := compactAt - after
		assert.Greater(t, float64(freed), 3*b.MinSavings*float64(compactAt), "window %d: %d kept + %d summary against %d at the compaction point", tc.window, b.KeepRecentTokens, b.SummaryTokens, compactAt)
	}
}

// By default the summary asked for grows with the fold, a quarter of it,
// from a twentieth of the budget up to SummaryTokens; a size that was set is
// asked for as it is.
func TestSummaryTargetScalesWithTheFold(t *testing.T) {
	e := newEngine(t, Config{ContextWindow: 32000})
	budget := e.Budget().Input
	require.Equal(t, 24000, budget)
	assert.Equal(t, 1200, e.cfg.summaryTarget(budget, 2000), "a small fold: a twentieth of the budget")
	assert.Equal(t, 2000, e.cfg.summaryTarget(budget, 8000), "a quarter of the fold")
	assert.Equal(t, 3000, e.cfg.summaryTarget(budget, 20000), "at most SummaryTokens")
	// Beside a 19,000-token agent overhead, 5,000 tokens are left for the
	// messages: the target is the default of that room, not of the budget.
	assert.Equal(t, 1000, e.cfg.summaryTarget(budget-19000, 20000), "sized by the room the overhead leaves")
	set := newEngine(t, Config{ContextWindow: 32000, SummaryTokens: 2500})
	assert.Equal(t, 2500, set.cfg.summaryTarget(budget, 100), "a size that was set")
	assert.Equal(t, 2500, set.cfg.summaryTarget(budget, 100000), "a size that was set")
}
