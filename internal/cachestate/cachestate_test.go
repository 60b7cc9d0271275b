package cachestate

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/cost"
)

var sonnet = cost.Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite5m: 3.75, CacheWrite1h: 6}

// A conversation's misses, growth, bill and cost report, against figures
// worked by hand at Sonnet's prices with 5-minute entries.
func TestConversationByHand(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	c := Conversation{Report: NewReport(cost.TTL5m)}
	send := func(at time.Duration, u cost.Request) string {
		tr := c.Begin(t0.Add(at), cost.TTL5m)
		return c.Finish(tr, "claude-sonnet-4-5", sonnet, &u, false, false)
	}
	assert.False(t, c.Cold(t0), "nothing cached, nothing to lose")
	assert.Equal(t, ColdStart, send(0, cost.Request{CacheWrite5m: 10_000, Output: 100}))
	assert.Empty(t, send(time.Minute, cost.Request{CacheRead: 10_000, CacheWrite5m: 2_000, Output: 100}))
	assert.Equal(t, cost.Growth{Gaps: 1, Tokens: 2_000}, c.Growth)
	// $0.039 and $0.012.
	assert.InDelta(t, 0.051, c.Bill.USD, 1e-9)
	assert.InDelta(t, c.Bill.USD, c.Report.UncompactedUSD, 1e-9, "no compaction: the bill")

	// A warm compaction from 12k to 4k with a $0.01 summary: the rewrite
	// is 4k written ($0.015); without it the 12k would be read ($0.0036);
	// each later request saves 8k reads ($0.0024).
	cc := c.Compacted(t0.Add(2*time.Minute), cost.TTL5m, sonnet, 12_000, 4_000, 0.01)
	assert.True(t, cc.Warm)
	assert.InDelta(t, 0.015, cc.RewriteUSD, 1e-9)
	assert.InDelta(t, 0.0036, cc.UncompactedUSD, 1e-9)
	assert.InDelta(t, 0.0024, cc.SavedPerRequestUSD, 1e-9)
	assert.InDelta(t, 0.025, c.Report.CompactionsUSD, 1e-9)

	// The next request writes its 4.5k anew ($0.018375 with its output):
	// a miss for the compaction, no growth seen. Without the compaction
	// its 12.5k would read the 12k and write 500 ($0.005475 beside the
	// replayed 4.5k write of $0.016875): $0.0114 less.
	assert.Equal(t, Compaction, send(3*time.Minute, cost.Request{CacheWrite5m: 4_500, Output: 100}))
	assert.Equal(t, 1, c.Compactions)
	assert.False(t, c.Report.Pending)
	assert.Equal(t, cost.Growth{Gaps: 1, Tokens: 2_000}, c.Growth)
	assert.InDelta(t, 0.069375, c.Bill.USD, 1e-9)
	assert.InDelta(t, 0.069375-0.0114, c.Report.UncompactedUSD, 1e-9)

	// Seven minutes later the 5-minute entry is gone.
	assert.True(t, c.Cold(t0.Add(10*time.Minute)))
	assert.Equal(t, TTLExpired, send(10*time.Minute, cost.Request{CacheWrite5m: 5_000, Output: 100}))
	assert.Equal(t, cost.Growth{Gaps: 2, Expired: 1, Tokens: 2_500}, c.Growth)
	// A read that covers under 90% of what was cached.
	assert.Equal(t, PrefixChanged, send(11*time.Minute, cost.Request{CacheRead: 4_000, CacheWrite5m: 1_500, Output: 100}))
	assert.Equal(t, map[string]int{ColdStart: 1, Compaction: 1, TTLExpired: 1, PrefixChanged: 1}, c.Misses)
	assert.Equal(t, 5, c.Requests)
	assert.Equal(t, "5m", c.TTL)

	// The state survives JSON, as serve stores it, and a clone shares
	// nothing.
	data, err := json.Marshal(c)
	require.NoError(t, err)
	var back Conversation
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, c, back)
	cp := c.Clone()
	cp.Misses[ColdStart]++
	cp.Report.Compactions[0].TokensAfter = 1
	assert.Equal(t, 1, c.Misses[ColdStart])
	assert.Equal(t, 4_000, c.Report.Compactions[0].TokensAfter)
}

// A 1-hour entry outlives a 10-minute pause; a request with no usage
// read still counts its miss and its time.
func TestConversationOneHourAndNoUsage(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	var c Conversation
	tr := c.Begin(t0, cost.TTL1h)
	assert.Equal(t, ColdStart, c.Finish(tr, "m", cost.Prices{}, nil, false, false))
	assert.Equal(t, "1h", c.TTL)
	assert.Zero(t, c.Requests)
	tr = c.Begin(t0.Add(10*time.Minute), cost.TTL1h)
	assert.False(t, tr.Cold)
	assert.Empty(t, tr.Known)
	assert.Nil(t, c.Report, "no report unless asked for")
}

func TestCompactionsListIsBounded(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	var c Conversation
	for i := range MaxCompactions + 5 {
		c.Compacted(t0.Add(time.Duration(i)*time.Minute), cost.TTL5m, sonnet, 10_000+i, 2_000, 0)
	}
	require.Len(t, c.Report.Compactions, MaxCompactions)
	assert.Equal(t, 10_005, c.Report.Compactions[0].TokensBefore, "the oldest dropped")
	assert.Equal(t, 8_000*(MaxCompactions+5)+(MaxCompactions+4)*(MaxCompactions+5)/2, c.Report.FreedTokens, "totals count every one")
}

func TestMissesCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMisses(reg)
	m.WithLabelValues(TTLExpired).Inc()
	n, err := testutil.GatherAndCount(reg, MetricName)
	require.NoError(t, err)
	assert.Equal(t, len(Reasons), n, "every reason has its series from the start")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.WithLabelValues(TTLExpired)))
}
