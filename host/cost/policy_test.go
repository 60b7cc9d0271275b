package cost_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/cost"
)

// growing is a conversation without compaction at a 100k budget, with an
// 18-minute pause that outlives a 5-minute cache before its fourth call.
func growing() []cost.Call {
	t0 := time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)
	return []cost.Call{
		{Time: t0, PromptTokens: 50_000},
		{Time: t0.Add(time.Minute), PromptTokens: 70_000},
		{Time: t0.Add(2 * time.Minute), PromptTokens: 90_000},
		{Time: t0.Add(20 * time.Minute), PromptTokens: 92_000},
		{Time: t0.Add(21 * time.Minute), PromptTokens: 97_000},
	}
}

func simulate(t *testing.T, pol cost.Policy) cost.Outcome {
	t.Helper()
	pol.Budget, pol.Kept, pol.SummaryTokens = 100_000, 20_000, 2_000
	o, err := cost.Simulate(sonnet, cost.TTL5m, growing(), pol)
	require.NoError(t, err)
	return o
}

func TestSimulateOverflowOnly(t *testing.T) {
	o := simulate(t, cost.Policy{})
	// 50000·3.75; 50000·0.3 + 20000·3.75; 70000·0.3 + 20000·3.75;
	// expired: 92000·3.75; 92000·0.3 + 5000·3.75.
	assert.InDelta(t, 0.76485, o.USD, 1e-12)
	assert.Zero(t, o.Compactions)
	assert.Equal(t, 50_000+70_000+90_000+92_000+97_000, o.PromptTokens)
}

func TestSimulateThreshold(t *testing.T) {
	o := simulate(t, cost.Policy{CompactAt: 0.85})
	// The third call (90k >= 85k) is compacted to 20k: the summary reads
	// 70000·3 and writes 2000·15 = 0.24; the prompt is written anew,
	// 20000·3.75; then 22000·3.75 (expired) and 22000·0.3 + 5000·3.75.
	assert.Equal(t, 1, o.Compactions)
	assert.InDelta(t, 0.24, o.SummaryUSD, 1e-12)
	assert.InDelta(t, 0.1875+0.09+0.075+0.0825+0.02535, o.Calls.USD, 1e-12)
	assert.InDelta(t, 0.70035, o.USD, 1e-12)
}

func TestSimulateCacheAwareWaitsForTheCacheToExpire(t *testing.T) {
	o := simulate(t, cost.Policy{CompactAt: 0.95, ColdAt: 0.5})
	// 90k on a warm cache is under the gate's 95%: kept. After the pause
	// the cache has expired and 92k >= 50%: compacted, folding 72k
	// (72000·3 + 2000·15 = 0.246); 20000·3.75; 20000·0.3 + 5000·3.75.
	assert.Equal(t, 1, o.Compactions)
	assert.InDelta(t, 0.246, o.SummaryUSD, 1e-12)
	assert.InDelta(t, 0.1875+0.09+0.096+0.075+0.02475, o.Calls.USD, 1e-12)
	assert.Equal(t, 50_000+70_000+90_000+20_000+25_000, o.PromptTokens)

	// The same calls with no pause, the last under 95%: the cache stays
	// warm and nothing is compacted.
	calls := growing()
	calls[3].Time = calls[2].Time.Add(time.Minute)
	calls[4].Time, calls[4].PromptTokens = calls[3].Time.Add(time.Minute), 94_000
	warm, err := cost.Simulate(sonnet, cost.TTL5m, calls, cost.Policy{Budget: 100_000, Kept: 20_000, SummaryTokens: 2_000, CompactAt: 0.95, ColdAt: 0.5})
	require.NoError(t, err)
	assert.Zero(t, warm.Compactions)
}

func TestSimulateCompactsAnOverflow(t *testing.T) {
	calls := growing()
	calls[4].PromptTokens = 105_000
	o, err := cost.Simulate(sonnet, cost.TTL5m, calls, cost.Policy{Budget: 100_000, Kept: 20_000, SummaryTokens: 2_000})
	require.NoError(t, err)
	assert.Equal(t, 1, o.Compactions)
	assert.Zero(t, o.Overflows)

	// A compaction that would free less than MinSavings of the prompt
	// (85k of 105k, under 90%) is not made: the prompt overflows instead.
	o, err = cost.Simulate(sonnet, cost.TTL5m, calls, cost.Policy{Budget: 100_000, Kept: 20_000, SummaryTokens: 2_000, MinSavings: 0.9})
	require.NoError(t, err)
	assert.Zero(t, o.Compactions)
	assert.Equal(t, 1, o.Overflows)

	_, err = cost.Simulate(sonnet, cost.TTL5m, calls, cost.Policy{Budget: 100_000, Kept: 100_000})
	assert.Error(t, err)
	_, err = cost.Simulate(sonnet, cost.TTL5m, calls, cost.Policy{})
	assert.Error(t, err)
}

func TestCallsOfMarksTheAgentsCompactions(t *testing.T) {
	calls := cost.CallsOf([]cost.Request{
		{CacheWrite5m: 10_000, Output: 5},
		{CacheRead: 10_000, CacheWrite5m: 2_000},
		{Input: 1_000, CacheWrite5m: 4_000},
		// A drop of less than a fifth is no compaction.
		{CacheRead: 4_500},
	})
	assert.Equal(t, []cost.Call{
		{PromptTokens: 10_000, OutputTokens: 5},
		{PromptTokens: 12_000},
		{PromptTokens: 5_000, Rewritten: true, Freed: 7_000},
		{PromptTokens: 4_500},
	}, calls)
	var sizes []int
	for _, c := range cost.Uncompacted(calls) {
		sizes = append(sizes, c.PromptTokens)
	}
	assert.Equal(t, []int{10_000, 12_000, 12_000, 11_500}, sizes)
}
