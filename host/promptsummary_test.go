package host

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A PromptSummarizer is asked first with the plan (the first kept
// message, the sizes, the target); its summary is checked and completed
// as a strategy's is, and its call is priced in the compaction's event.
// Declining, failing, or answering with a summary that does not shrink
// the context leaves the compaction to the strategies.
func TestPromptSummarizer(t *testing.T) {
	var got []*PromptSummaryRequest
	answer := func(ps *PromptSummary, err error) PromptSummarizer {
		return func(_ context.Context, req *PromptSummaryRequest) (*PromptSummary, error) {
			got = append(got, req)
			return ps, err
		}
	}
	run := func(f PromptSummarizer) (Compaction, *CompactionEvent, []*FallbackEvent, *recorder) {
		got = nil
		rec := &recorder{}
		e := newEngine(t, Config{ContextWindow: 200000, MaxOutputTokens: 2000, KeepRecentTokens: 2000},
			WithStrategy("structured", rec), WithPromptSummarizer(f))
		var ev *CompactionEvent
		var falls []*FallbackEvent
		e.Subscribe(func(e Event) {
			switch e := e.(type) {
			case *CompactionEvent:
				ev = e
			case *FallbackEvent:
				falls = append(falls, e)
			}
		})
		s := e.NewSession()
		coding(t, s, 4, 600)
		c, err := e.Compact(ctx, s, CompactOptions{})
		require.NoError(t, err)
		require.NotNil(t, ev)
		return c, ev, falls, rec
	}

	c, ev, falls, rec := run(answer(&PromptSummary{Summary: "## Active Task\n> turn 3", Model: "claude-sonnet-4-5",
		Usage: Usage{InputTokens: 900, CacheReadTokens: 9000, OutputTokens: 120}, CostUSD: 0.0063}, nil))
	assert.Equal(t, StrategyCachedPrompt, c.Strategy)
	assert.Empty(t, rec.calls(), "the strategy ran too")
	assert.Empty(t, falls)
	require.Len(t, got, 1)
	assert.NotEmpty(t, got[0].FirstKept.ID)
	assert.Positive(t, got[0].FoldedTokens)
	assert.Greater(t, got[0].PromptTokens, got[0].FoldedTokens)
	assert.Positive(t, got[0].Summarize.TargetTokens)
	assert.Contains(t, c.Summary, "## Active Task\n> turn 3")
	assert.Contains(t, c.Summary, "pkg0/edit0.go", "the modified files were not completed")
	assert.InDelta(t, 0.0063, ev.CostUSD, 1e-12)
	assert.Equal(t, 9000, ev.ModelUsage.CacheReadTokens)

	// Priced from the catalog when the summarizer gives no cost:
	// 900·3 + 9000·0.3 + 120·15 per million.
	_, ev, _, _ = run(answer(&PromptSummary{Summary: "## Active Task\n> turn 3", Model: "claude-sonnet-4-5",
		Usage: Usage{InputTokens: 900, CacheReadTokens: 9000, OutputTokens: 120}}, nil))
	assert.InDelta(t, 0.0072, ev.CostUSD, 1e-12)

	c, _, falls, rec = run(answer(nil, nil))
	assert.Equal(t, "structured", c.Strategy)
	assert.NotEmpty(t, rec.calls())
	assert.Empty(t, falls, "declining is not a failure")

	c, _, falls, _ = run(answer(nil, errors.New("upstream status 500")))
	assert.Equal(t, "structured", c.Strategy)
	require.Len(t, falls, 1)
	assert.Equal(t, StrategyCachedPrompt, falls[0].From)
	assert.Equal(t, "structured", falls[0].To)

	c, ev, falls, _ = run(answer(&PromptSummary{Summary: filler("bloat", 20000), Model: "m", CostUSD: 0.5}, nil))
	assert.Equal(t, "structured", c.Strategy)
	require.Len(t, falls, 1)
	assert.ErrorIs(t, falls[0].Err, ErrSummaryNotSmaller)
	assert.InDelta(t, 0.5, ev.CostUSD, 1e-12, "the call that answered is not paid for")
}
