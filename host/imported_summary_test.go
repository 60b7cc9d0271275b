package host

import (
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A session read from a file compacted before (by its agent, or written
// back by compact-host) opens with that compaction's summary message: the
// next compaction merges it as the previous summary, not as a message to
// fold, so it is never summarized as if it were conversation.
func TestCompactionMergesImportedSummary(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", rec))
	s := e.NewSession()
	require.NoError(t, s.Append(Message{ID: "sum", Role: abi.RoleUser, Summary: true,
		Content: []Block{{Type: abi.BlockText, Text: "EARLIER SUMMARY: the parser rewrite"}}}))
	coding(t, s, 5, 600)
	_, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	var first *abi.SummarizeRequest
	for _, r := range rec.calls() {
		if r.Kind == abi.FoldHistory {
			first = r
			break
		}
	}
	require.NotNil(t, first)
	assert.Equal(t, "EARLIER SUMMARY: the parser rewrite", first.PreviousSummary)
	for _, m := range first.Messages {
		assert.False(t, m.Summary, "the imported summary is re-sent as a message to fold")
	}
	require.NoError(t, Validate(s.Context(), false))
	for _, m := range s.Context() {
		assert.NotEqual(t, "sum", m.ID, "the imported summary was folded")
	}
}
