package host

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/cost"
)

// The cache-aware gate compacts a context past half the budget once the
// caller says the cache has expired, keeps a warm one past the threshold's
// point, and compacts past halfway to the emergency threshold; the
// threshold policy ignores the cache.
func TestGateFollowsThePolicy(t *testing.T) {
	grow := func(e *Engine, share float64) *Session {
		s := e.NewSession()
		b := e.Budget()
		for turn := 0; float64(s.ContextTokens()) < share*float64(b.Input); turn++ {
			coding(t, s, 1, 100)
		}
		return s
	}
	for _, tc := range []struct {
		policy string
		share  float64
		cold   bool
		want   cost.Reason
	}{
		{PolicyThreshold, 0.55, true, ""},
		{PolicyThreshold, 0.78, false, cost.DueThreshold},
		{PolicyCacheAware, 0.55, false, ""},
		{PolicyCacheAware, 0.55, true, cost.DueCold},
		{PolicyCacheAware, 0.78, false, ""},
		{PolicyCacheAware, 0.87, false, cost.DueThreshold},
	} {
		rec := &recorder{}
		e := newEngine(t, Config{Policy: tc.policy, PruneMinTokens: 100000}, WithStrategy("structured", rec))
		s := grow(e, tc.share)
		used := s.ContextTokens()
		require.Less(t, float64(used), (tc.share+0.05)*float64(e.Budget().Input), "the session outgrew the case")
		assert.Equal(t, tc.want, e.Due(used, tc.cold), "%s at %d of %d, cold %v", tc.policy, used, e.Budget().Input, tc.cold)
		d, err := e.EnsureFits(ctx, s, Request{CacheCold: tc.cold})
		require.NoError(t, err)
		if tc.want == "" {
			assert.Equal(t, ActionNone, d.Action, "%+v", tc)
			assert.Empty(t, rec.calls())
		} else {
			assert.Equal(t, ActionCompacted, d.Action, "%+v", tc)
			assert.Less(t, d.TokensAfter, d.TokensBefore)
		}
	}
}

func TestPolicyConfig(t *testing.T) {
	e := newEngine(t, Config{})
	b := e.Budget()
	assert.Equal(t, PolicyThreshold, b.Policy)
	assert.Equal(t, 0.5, b.ColdShare)
	assert.Equal(t, cost.TTL5m, b.CacheTTL)
	assert.Zero(t, e.Policy().ColdAt)

	e = newEngine(t, Config{Policy: PolicyCacheAware, ColdShare: 0.6, CacheTTL: cost.TTL1h})
	pol := e.Policy()
	assert.Equal(t, 0.6, pol.ColdAt)
	assert.InDelta(t, 0.85, pol.CompactAt, 1e-9)
	assert.Equal(t, cost.TTL1h, e.Budget().CacheTTL)

	for _, c := range []Config{
		{ContextWindow: 20000, Policy: "cheapest"},
		{ContextWindow: 20000, ColdShare: 1.5},
		{ContextWindow: 20000, CacheTTL: -1},
	} {
		var ce *ConfigError
		_, err := New(c)
		assert.ErrorAs(t, err, &ce, "%+v", c)
	}
}
