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
// chooses for the conversation's growth and pauses. Before any pause is
// seen that is the configured keep; once pauses are seen, the expected
// cost per call grows with every token kept whether the cache stayed warm
// or expired, so the fold keeps its floor, a quarter of the configured
// keep, and the compaction leaves the context smaller.
func TestCacheAwareFoldFollowsTheGrowth(t *testing.T) {
	warm := cost.Growth{Gaps: 20, Tokens: 20 * 1500}
	some := cost.Growth{Gaps: 20, Expired: 3, Tokens: 20 * 1500}
	cold := cost.Growth{Gaps: 20, Expired: 20, Tokens: 20 * 1500}

	e, s, _ := foldSession(t, PolicyCacheAware, 0.88)
	base := e.Budget().KeepRecentTokens
	assert.Equal(t, base, e.KeepRecent(s, Request{}), "no pause seen: the configured keep")
	for name, g := range map[string]cost.Growth{"warm": warm, "some expired": some, "all expired": cold} {
		assert.Equal(t, base/4, e.KeepRecent(s, Request{Growth: g}), name)
	}
	// A model the catalog does not price keeps the configured keep.
	unpriced := newEngine(t, Config{ContextWindow: 100000, MaxOutputTokens: 10000, Policy: PolicyCacheAware})
	assert.Equal(t, unpriced.Budget().KeepRecentTokens, unpriced.KeepRecent(unpriced.NewSession(), Request{Growth: cold}))

	after := map[string]int{}
	for name, g := range map[string]cost.Growth{"none seen": {}, "seen": some} {
		e, s, rec := foldSession(t, PolicyCacheAware, 0.88)
		d, err := e.EnsureFits(ctx, s, Request{Growth: g})
		require.NoError(t, err)
		require.Equal(t, ActionCompacted, d.Action, name)
		require.NotEmpty(t, rec.calls(), name)
		require.Len(t, s.Compactions(), 1, name)
		after[name] = d.TokensAfter
		// What was kept verbatim is the fold's choice, to a message.
		kept := s.ContextTokens() - s.summaryTokens()
		want := base
		if g.Gaps > 0 {
			want = base / 4
		}
		assert.InDelta(t, want, kept, 1500, "%s: kept %d verbatim, the fold chose %d", name, kept, want)
	}
	assert.Less(t, after["seen"], after["none seen"], "the fold leaves less")
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
