package cost_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
)

// sonnet is Claude Sonnet 4.5's price list: reads at a tenth of input,
// 5-minute writes at 1.25x, 1-hour writes at 2x.
var sonnet = cost.Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite5m: 3.75, CacheWrite1h: 6}

func TestSonnetPricesAreTheCatalogs(t *testing.T) {
	m, ok := catalog.Lookup("claude-sonnet-4-5")
	require.True(t, ok)
	assert.Equal(t, sonnet, m.Prices())
}

func TestBillRequestsPricesEachKindOfToken(t *testing.T) {
	reqs := []cost.Request{
		// A session's first request, written to a 1-hour cache.
		{Input: 3, CacheWrite1h: 43_937, Output: 2},
		// The next reads it and writes its new tail for 5 minutes.
		{Input: 5, CacheRead: 43_937, CacheWrite5m: 1_000, Output: 100},
	}
	b := cost.BillRequests(sonnet, reqs)
	// 3·3 + 43937·6 + 2·15 = 263661 and 5·3 + 43937·0.3 + 1000·3.75 + 100·15
	// = 18446.1, in millionths of a dollar.
	assert.InDelta(t, 0.263661+0.0184461, b.USD, 1e-12)
	assert.Equal(t, cost.Bill{Requests: 2, Input: 8, CacheRead: 43_937, CacheWrite5m: 1_000, CacheWrite1h: 43_937, Output: 102, USD: b.USD}, b)
	assert.InDelta(t, 0.263661, reqs[0].USD(sonnet), 1e-12)
}

// Four calls with an 8-minute pause before the third: the pause outlives
// a 5-minute cache entry, not a 1-hour one.
func pausedCalls() []cost.Call {
	t0 := time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)
	return []cost.Call{
		{Time: t0, PromptTokens: 10_000, OutputTokens: 100},
		{Time: t0.Add(2 * time.Minute), PromptTokens: 12_000, OutputTokens: 100},
		{Time: t0.Add(10 * time.Minute), PromptTokens: 13_000, OutputTokens: 100},
		{Time: t0.Add(11 * time.Minute), PromptTokens: 14_000, OutputTokens: 100},
	}
}

func TestReplayFiveMinuteEntryExpiresInAPause(t *testing.T) {
	b := cost.Replay(sonnet, cost.TTL5m, pausedCalls())
	// 10000·3.75 + 1500 = 39000; 10000·0.3 + 2000·3.75 + 1500 = 12000;
	// expired: 13000·3.75 + 1500 = 50250; 13000·0.3 + 1000·3.75 + 1500 = 9150.
	assert.InDelta(t, 0.1104, b.USD, 1e-12)
	assert.Equal(t, 10_000+2_000+13_000+1_000, b.CacheWrite5m)
	assert.Equal(t, 10_000+13_000, b.CacheRead)
	assert.Zero(t, b.CacheWrite1h)
}

func TestReplayOneHourEntryOutlivesThePause(t *testing.T) {
	b := cost.Replay(sonnet, cost.TTL1h, pausedCalls())
	// 10000·6 + 1500 = 61500; 10000·0.3 + 2000·6 + 1500 = 16500;
	// 12000·0.3 + 1000·6 + 1500 = 11100; 13000·0.3 + 1000·6 + 1500 = 11400.
	assert.InDelta(t, 0.1005, b.USD, 1e-12)
	assert.Equal(t, 10_000+2_000+1_000+1_000, b.CacheWrite1h)
	assert.Equal(t, 10_000+12_000+13_000, b.CacheRead)
}

func TestReplayRewrittenPrefixIsWrittenWhole(t *testing.T) {
	t0 := time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)
	calls := []cost.Call{
		{Time: t0, PromptTokens: 100_000},
		// A compaction folded 85k tokens: the prompt starts with a summary.
		{Time: t0.Add(time.Minute), PromptTokens: 20_000, Rewritten: true, Freed: 85_000},
		{Time: t0.Add(2 * time.Minute), PromptTokens: 22_000},
	}
	// 100000·3.75; 20000·3.75 written anew; 20000·0.3 + 2000·3.75.
	assert.InDelta(t, 0.4635, cost.Replay(sonnet, cost.TTL5m, calls).USD, 1e-12)

	// Without the compaction every prompt holds the 85k more and grows on
	// the warm cache: 100000·3.75; 100000·0.3 + 5000·3.75; 105000·0.3 + 2000·3.75.
	un := cost.Uncompacted(calls)
	assert.Equal(t, []int{100_000, 105_000, 107_000}, []int{un[0].PromptTokens, un[1].PromptTokens, un[2].PromptTokens})
	assert.InDelta(t, 0.46275, cost.Replay(sonnet, cost.TTL5m, un).USD, 1e-12)
	assert.Equal(t, 20_000, calls[1].PromptTokens, "Uncompacted changed its input")

	// A prompt that shrank without being marked is taken as a prefix of
	// the cached one: 100000·3.75; 20000·0.3; 20000·0.3 + 2000·3.75.
	calls[1].Rewritten = false
	assert.InDelta(t, 0.375+0.006+0.0135, cost.Replay(sonnet, cost.TTL5m, calls).USD, 1e-12)
}

func TestPriceCompaction(t *testing.T) {
	// Summary calls of 90000 input and 2000 output tokens at the same
	// prices: 90000·3 + 2000·15.
	summary := cost.FromUsage(abi.Usage{InputTokens: 90_000, OutputTokens: 2_000}).USD(sonnet)

	warm := cost.PriceCompaction(sonnet, cost.TTL5m, 100_000, 20_000, summary, true)
	assert.InDelta(t, 0.30, warm.SummaryUSD, 1e-12)          // 90000·3 + 2000·15
	assert.InDelta(t, 0.075, warm.RewriteUSD, 1e-12)         // 20000·3.75
	assert.InDelta(t, 0.03, warm.UncompactedUSD, 1e-12)      // 100000·0.3
	assert.InDelta(t, 0.024, warm.SavedPerRequestUSD, 1e-12) // 80000·0.3
	assert.InDelta(t, 0.375, warm.USD(), 1e-12)
	// Request n: 0.375 + (n-1)·0.006 against 0.03 + (n-1)·0.03; n=15
	// gives 0.459 > 0.45, n=16 gives 0.465 <= 0.48.
	assert.Equal(t, 16, warm.BreakEvenRequests)

	// With a 1-hour cache the rewrite costs 20000·6.
	hour := cost.PriceCompaction(sonnet, cost.TTL1h, 100_000, 20_000, summary, true)
	assert.InDelta(t, 0.12, hour.RewriteUSD, 1e-12)

	// Once the cache has expired the old prompt is written again anyway:
	// 100000·3.75 = 0.375, the compaction's own cost, so it pays at once.
	cold := cost.PriceCompaction(sonnet, cost.TTL5m, 100_000, 20_000, summary, false)
	assert.InDelta(t, 0.375, cold.UncompactedUSD, 1e-12)
	assert.Equal(t, 1, cold.BreakEvenRequests)

	// A compaction that frees nothing never pays.
	none := cost.PriceCompaction(sonnet, cost.TTL5m, 20_000, 20_000, summary, true)
	assert.Zero(t, none.BreakEvenRequests)
}
