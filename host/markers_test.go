package host

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/recall"
)

// A strategy built before markers existed (it ignores them, and rewrites
// the previous summary) still leaves a summary that names the folded span,
// the large tool outputs and everything the previous summary named; each
// marker resolves to its original in the session's messages.
func TestSummariesCarryMarkersThatResolve(t *testing.T) {
	var reqs []*abi.SummarizeRequest
	forgetful := StrategyFunc(func(_ context.Context, _ pluginServices, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		reqs = append(reqs, req)
		return &abi.SummarizeResponse{Summary: "Work went on."}, nil
	})
	e := newEngine(t, Config{ContextWindow: 200000, MaxOutputTokens: 2000, KeepRecentTokens: 2000}, WithStrategy("structured", forgetful))
	s := e.NewSession()
	coding(t, s, 4, 600)
	first, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, reqs)
	ms := reqs[0].Markers
	require.NotEmpty(t, ms, "the request carried no markers")
	assert.Equal(t, abi.MarkerSpan, ms[0].Kind)
	tools := 0
	for _, m := range ms {
		assert.Contains(t, first.Summary, m.Text(), "the host did not add a marker the strategy left out")
		if m.Kind == abi.MarkerToolOutput {
			tools++
			assert.Equal(t, "Read", m.ToolName)
			assert.GreaterOrEqual(t, m.Bytes, recall.MinToolOutputBytes)
		}
	}
	assert.Positive(t, tools)
	assert.LessOrEqual(t, tools, recall.MaxToolMarkers)

	coding(t, s, 4, 600)
	reqs = nil
	second, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	for _, ref := range abi.MarkersIn(first.Summary) {
		assert.Contains(t, second.Summary, "[recall:"+ref+"]", "a merge lost a marker of the previous summary")
	}

	msgs := s.Messages()
	key, ok := recall.KeyFor(msgs)
	require.True(t, ok)
	x := recall.New(msgs, key)
	refs := abi.MarkersIn(second.Summary)
	require.Greater(t, len(refs), len(ms))
	for _, ref := range refs {
		p, err := x.Recall(ref, 1)
		require.NoError(t, err, ref)
		if strings.HasPrefix(ref, "t-") {
			assert.Contains(t, p.Text, "read line", ref)
		}
	}
	span, err := x.Recall(ms[0].Ref, 1)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(span.Text, "--- user"), "the span does not open with the first folded message: %.80q", span.Text)
	assert.Contains(t, span.Text, "turn 0: please fix the failing test in pkg0")
}
