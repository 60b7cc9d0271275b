package eval

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// For every probe the offline structured summary misses, at 200k and at
// 32k, searching the folded originals with the probe's own terms and
// recalling the top hit answers it: what compaction folds stays within two
// tool calls of the model.
func TestRecallOracleAnswersWhatSummariesMiss(t *testing.T) {
	corpus(t)
	for _, window := range []int{200_000, 32_000} {
		rep, err := RunRecallOracle(ctx, ProbeOptions{Probes: filepath.Join("testdata", "probes"), InProcess: true, Window: window})
		require.NoError(t, err)
		t.Logf("window %d: %d probes, the summary misses %d; search and recall answer %d (%.0f%%), %.2f tool calls each",
			window, rep.Probes, rep.Missed, rep.Answered, 100*rep.Share, rep.MeanToolCalls)
		require.Positive(t, rep.Missed, "the summaries miss nothing at %d: the oracle is not exercised", window)
		assert.Empty(t, rep.Unanswered, "window %d", window)
		assert.Equal(t, rep.Missed, rep.Answered)
		assert.GreaterOrEqual(t, rep.MeanToolCalls, 2.0, "a missed probe needs at least a search and a recall")
	}
}
