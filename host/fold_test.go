package host

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/cost"
)

// foldSession is a session of a priced model past share of its budget.
func foldSession(t *testing.T, policy string, share float64) (*Engine, *Session, *recorder) {
	t.Helper()
	rec := &recorder{}
	e := newEngine(t, Config{Model: "claude-sonnet-4-5", ContextWindow: 100000, MaxOutputTokens: 10000, Policy: policy,
		PruneMinTokens: 100000}, WithStrategy("structured", rec))
	s := e.NewSession()
	for float64(s.ContextTokens()) < share*float64(e.Budget().Input) {
		coding(t, s, 1, 300)
	}
	return e, s, rec
}

// Under the cache-aware policy a gate compaction keeps what cost.Fold
// chooses for the conversation's pauses: a cache that stays warm reads
// what is kept at a tenth of the input price, so the configured keep is
// kept; a cache that expires between calls writes it anew each time, so
// less is kept, and the compaction leaves the context smaller.
func TestCacheAwareFoldFollowsThePauses(t *testing.T) {
	warm := cost.Growth{Gaps: 20, Tokens: 20 * 1500}
	some := cost.Growth{Gaps: 20, Expired: 3, Tokens: 20 * 1500}
	cold := cost.Growth{Gaps: 20, Expired: 20, Tokens: 20 * 1500}

	e, s, _ := foldSession(t, PolicyCacheAware, 0.88)
	base := e.Budget().KeepRecentTokens
	keepWarm, keepSome, keepCold := e.KeepRecent(s, Request{Growth: warm}), e.KeepRecent(s, Request{Growth: some}), e.KeepRecent(s, Request{Growth: cold})
	assert.Equal(t, base, e.KeepRecent(s, Request{}), "no pause seen: the configured keep")
	assert.Equal(t, base, keepWarm, "a warm cache keeps the configured keep")
	assert.Less(t, keepSome, keepWarm, "3 pauses of 20 expired")
	assert.Less(t, keepCold, keepSome, "every pause expired")
	assert.GreaterOrEqual(t, keepCold, base/4, "never under a quarter of the configured keep")

	after := map[string]int{}
	for name, g := range map[string]cost.Growth{"warm": warm, "cold": cold} {
		e, s, rec := foldSession(t, PolicyCacheAware, 0.88)
		d, err := e.EnsureFits(ctx, s, Request{Growth: g})
		require.NoError(t, err)
		require.Equal(t, ActionCompacted, d.Action, name)
		require.NotEmpty(t, rec.calls(), name)
		require.Len(t, s.Compactions(), 1, name)
		after[name] = d.TokensAfter
		// What was kept verbatim is the fold's choice, to a message.
		kept := s.ContextTokens() - s.summaryTokens()
		want := keepCold
		if name == "warm" {
			want = keepWarm
		}
		assert.InDelta(t, want, kept, 1500, "%s: kept %d verbatim, the fold chose %d", name, kept, want)
	}
	assert.Less(t, after["cold"], after["warm"], "the expired cache's compaction leaves less")
}

// The threshold policy keeps KeepRecentTokens whatever the pauses: the
// same compaction with or without a growth.
func TestThresholdFoldIgnoresGrowth(t *testing.T) {
	g := cost.Growth{Gaps: 20, Expired: 20, Tokens: 20 * 1500}
	var results [2]struct {
		after, folded int
		summary       string
	}
	for i, req := range []Request{{}, {Growth: g}} {
		e, s, _ := foldSession(t, PolicyThreshold, 0.8)
		assert.Equal(t, e.Budget().KeepRecentTokens, e.KeepRecent(s, req))
		d, err := e.EnsureFits(ctx, s, req)
		require.NoError(t, err)
		require.Equal(t, ActionCompacted, d.Action)
		require.Len(t, s.Compactions(), 1)
		results[i].after, results[i].folded = d.TokensAfter, s.Compactions()[0].MessagesFolded
		results[i].summary = s.Compactions()[0].Summary
	}
	assert.Equal(t, results[0], results[1])
}
