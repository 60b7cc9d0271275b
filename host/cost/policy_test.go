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

// opus is Claude Opus 4.6's price list.
var opus = cost.Prices{Input: 5, Output: 25, CacheRead: 0.5, CacheWrite5m: 6.25, CacheWrite1h: 10}

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
	// 70000·3 with 1000 of instructions and writes 2000·15 = 0.243; the
	// prompt is written anew,
	// 20000·3.75; then 22000·3.75 (expired) and 22000·0.3 + 5000·3.75.
	assert.Equal(t, 1, o.Compactions)
	assert.InDelta(t, 0.243, o.SummaryUSD, 1e-12)
	assert.InDelta(t, 0.1875+0.09+0.075+0.0825+0.02535, o.Calls.USD, 1e-12)
	assert.InDelta(t, 0.70335, o.USD, 1e-12)
}

func TestSimulateStepsSumToTheOutcome(t *testing.T) {
	o := simulate(t, cost.Policy{CompactAt: 0.85})
	calls := growing()
	require.Len(t, o.Steps, len(calls))
	sum, marks := 0.0, 0
	for i, s := range o.Steps {
		assert.Equal(t, calls[i].Time, s.Time)
		sum += s.USD
		if s.Compacted {
			marks++
		}
	}
	assert.InDelta(t, o.USD, sum, 1e-12)
	assert.Equal(t, o.Compactions, marks)
	// The third call carries its summary call (0.243) and its rewrite
	// (20000·3.75).
	assert.True(t, o.Steps[2].Compacted)
	assert.InDelta(t, 0.243+0.075, o.Steps[2].USD, 1e-12)
}

func TestSimulateCacheAwareWaitsForTheCacheToExpire(t *testing.T) {
	o := simulate(t, cost.Policy{CompactAt: 0.95, ColdAt: 0.5})
	// 90k on a warm cache is under the gate's 95%: kept. After the pause
	// the cache has expired and 92k >= 50%: compacted, folding 72k
	// (73000·3 with the instructions, + 2000·15 = 0.249); 20000·3.75;
	// 20000·0.3 + 5000·3.75.
	assert.Equal(t, 1, o.Compactions)
	assert.InDelta(t, 0.249, o.SummaryUSD, 1e-12)
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
		// The agent's compaction left its 3k head cached.
		{Input: 1_000, CacheRead: 3_000, CacheWrite5m: 1_000},
		// A drop of less than a fifth is no compaction.
		{CacheRead: 4_500},
	})
	assert.Equal(t, []cost.Call{
		{PromptTokens: 10_000, OutputTokens: 5},
		{PromptTokens: 12_000},
		{PromptTokens: 5_000, Rewritten: true, Freed: 7_000, Head: 3_000},
		{PromptTokens: 4_500},
	}, calls)
	var sizes []int
	for _, c := range cost.Uncompacted(calls) {
		sizes = append(sizes, c.PromptTokens)
	}
	assert.Equal(t, []int{10_000, 12_000, 12_000, 11_500}, sizes)
}

func TestDueNamesItsReason(t *testing.T) {
	pol := cost.Policy{Budget: 100_000, CompactAt: 0.85, ColdAt: 0.5}
	assert.Equal(t, cost.DueOverflow, pol.Due(100_001, false))
	assert.Equal(t, cost.DueThreshold, pol.Due(85_000, false))
	assert.Equal(t, cost.DueCold, pol.Due(50_000, true))
	assert.Equal(t, cost.Reason(""), pol.Due(49_999, true))
	assert.Equal(t, cost.Reason(""), pol.Due(84_999, false))
	// Without ColdAt an expired cache changes nothing; without CompactAt
	// only an overflow is due.
	assert.Equal(t, cost.Reason(""), cost.Policy{Budget: 100_000, CompactAt: 0.85}.Due(60_000, true))
	assert.Equal(t, cost.Reason(""), cost.Policy{Budget: 100_000}.Due(100_000, false))
	assert.InDelta(t, 0.85, cost.WarmShare(0.75, 0.95), 1e-12)
}

// A compaction on a warm 1-hour cache whose summary call resends the
// cached prompt, and whose rewrite keeps the head cached, billed by hand.
func TestSimulateCachedSummaryAndHead(t *testing.T) {
	t0 := time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)
	calls := []cost.Call{
		{Time: t0, PromptTokens: 50_000},
		{Time: t0.Add(time.Minute), PromptTokens: 90_000},
		{Time: t0.Add(2 * time.Minute), PromptTokens: 92_000},
	}
	pol := cost.Policy{Budget: 100_000, CompactAt: 0.85, Kept: 20_000, SummaryTokens: 2_000, Head: 8_000}
	o, err := cost.Simulate(sonnet, cost.TTL1h, calls, pol)
	require.NoError(t, err)
	// 50000·6 = 0.3; then 90k >= 85k: the summary folds 70k as fresh input,
	// 71000·3 + 2000·15 = 0.243 (1000 of instructions); the kept 20k reads the 8k head and writes
	// 12k: 8000·0.3 + 12000·6 = 0.0744; 20000·0.3 + 2000·6 = 0.018.
	assert.Equal(t, 1, o.Compactions)
	assert.InDelta(t, 0.243, o.SummaryUSD, 1e-12)
	assert.InDelta(t, 0.3+0.0744+0.018, o.Calls.USD, 1e-12)

	// The summary call as the cached prompt plus an instruction: it reads
	// the 50k cached and sends, up to the cut (the 90k less the 10k kept
	// verbatim), 30k new and the instruction as input:
	// 50000·0.3 + 31000·3 + 2000·15 = 0.138.
	pol.CachedSummary = true
	o, err = cost.Simulate(sonnet, cost.TTL1h, calls, pol)
	require.NoError(t, err)
	assert.InDelta(t, 0.138, o.SummaryUSD, 1e-12)
	assert.InDelta(t, 0.3+0.0744+0.018, o.Calls.USD, 1e-12)

	// After a pause past the 1-hour TTL nothing is cached: resending the
	// prompt would bill all 90k as fresh input, so the summary call sends
	// what it folds, 71000·3 + 2000·15 = 0.243, and the kept prompt is
	// written whole, 20000·6 = 0.12.
	calls[1].Time = t0.Add(61 * time.Minute)
	calls[2].Time = t0.Add(62 * time.Minute)
	o, err = cost.Simulate(sonnet, cost.TTL1h, calls, pol)
	require.NoError(t, err)
	assert.InDelta(t, 0.243, o.SummaryUSD, 1e-12)
	assert.InDelta(t, 0.3+0.12+0.018, o.Calls.USD, 1e-12)

	// The same compaction on a 5-minute cache, warm: the writes cost
	// 3.75: 50000·3.75; 8000·0.3 + 12000·3.75; 20000·0.3 + 2000·3.75.
	calls[1].Time, calls[2].Time = t0.Add(time.Minute), t0.Add(2*time.Minute)
	o, err = cost.Simulate(sonnet, cost.TTL5m, calls, pol)
	require.NoError(t, err)
	assert.InDelta(t, 0.138, o.SummaryUSD, 1e-12)
	assert.InDelta(t, 0.1875+0.0474+0.0135, o.Calls.USD, 1e-12)

	// With a compaction model at a third of the price (1 in, 5 out) the
	// fresh call, 71000·1 + 2000·5 = 0.081, costs less than the cached
	// one at the conversation's prices: it is the one made.
	pol.SummaryPrices = cost.Prices{Input: 1, Output: 5}
	o, err = cost.Simulate(sonnet, cost.TTL5m, calls, pol)
	require.NoError(t, err)
	assert.InDelta(t, 0.081, o.SummaryUSD, 1e-12)
}

func TestReplayKeepsTheHeadOfARewrittenPrompt(t *testing.T) {
	t0 := time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)
	calls := []cost.Call{
		{Time: t0, PromptTokens: 100_000},
		{Time: t0.Add(time.Minute), PromptTokens: 20_000, Rewritten: true, Freed: 80_000, Head: 15_000},
		// Expired: the head is gone too.
		{Time: t0.Add(9 * time.Minute), PromptTokens: 30_000, Rewritten: true, Freed: 1, Head: 15_000},
	}
	// 100000·3.75; 15000·0.3 + 5000·3.75; 30000·3.75.
	assert.InDelta(t, 0.375+0.02325+0.1125, cost.Replay(sonnet, cost.TTL5m, calls).USD, 1e-12)
}

// A long conversation at a steady pace: folding to what Fold chooses
// bills less than keeping the gate's fixed share, and Fold stays within
// its bounds.
func TestFoldBillsLessThanAFixedKeep(t *testing.T) {
	t0 := time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)
	var calls []cost.Call
	for i := range 300 {
		calls = append(calls, cost.Call{Time: t0.Add(time.Duration(i) * 30 * time.Second), PromptTokens: 10_000 + 1_500*i, OutputTokens: 200})
	}
	pol := cost.Policy{Budget: 160_000, CompactAt: 0.85, Kept: 90_000, SummaryTokens: 8_000, Head: 10_000, MinKeep: 5_000, CachedSummary: true, MinSavings: 0.1}
	fixed, err := cost.Simulate(opus, cost.TTL1h, calls, pol)
	require.NoError(t, err)
	pol.Fold = true
	folded, err := cost.Simulate(opus, cost.TTL1h, calls, pol)
	require.NoError(t, err)
	assert.Less(t, folded.USD, fixed.USD)
	assert.Zero(t, folded.Overflows)

	g := cost.Growth{Gaps: 10, Tokens: 15_000}
	k := cost.Fold(opus, cost.TTL1h, pol, g, 136_000)
	assert.GreaterOrEqual(t, k, pol.Head+pol.SummaryTokens+pol.MinKeep)
	assert.LessOrEqual(t, k, int(0.9*136_000))
	// With nothing seen yet, Fold keeps Kept.
	assert.Equal(t, pol.Kept, cost.Fold(opus, cost.TTL1h, pol, cost.Growth{}, 136_000))
	// Each term of the expected cost grows with the keep, so the least is
	// chosen whatever the pauses: all warm, some expired, all expired.
	for _, expired := range []int{0, 3, 10} {
		assert.Equal(t, pol.Head+pol.SummaryTokens+pol.MinKeep, cost.Fold(opus, cost.TTL1h, pol, cost.Growth{Gaps: 10, Expired: expired, Tokens: 15_000}, 136_000))
	}
	// Growth that outruns the window leaves no choice but the least.
	assert.Equal(t, pol.Head+pol.SummaryTokens+pol.MinKeep, cost.Fold(opus, cost.TTL1h, pol, cost.Growth{Gaps: 1, Tokens: 200_000}, 136_000))
}

func TestGrowthCountsExpiredPauses(t *testing.T) {
	var g cost.Growth
	g.Observe(4*time.Minute, cost.TTL5m, 1_000)
	g.Observe(6*time.Minute, cost.TTL5m, -500)
	assert.Equal(t, cost.Growth{Gaps: 2, Expired: 1, Tokens: 1_000}, g)
}

// The one decision between a summary call that resends the cached prompt
// and a fresh one, by hand: Opus reading a warm 150k prompt costs more
// than Haiku reading the 120k it folds, and less than Opus doing so.
func TestChooseSummaryCall(t *testing.T) {
	haiku := cost.Prices{Input: 1, Output: 5, CacheRead: 0.1, CacheWrite5m: 1.25, CacheWrite1h: 2}
	shape := cost.SummaryShape{Cached: 150_000, Folded: 120_000, FoldEnd: 140_000, Summary: 2_000}
	// Cached: 150000·0.5 + 1000·5 + 2000·25 = 0.13; fresh at Haiku:
	// 121000·1 + 2000·5 = 0.131.
	sc := cost.ChooseSummaryCall(opus, haiku, shape)
	assert.True(t, sc.Cached)
	assert.InDelta(t, 0.13, sc.USD, 1e-12)
	assert.Equal(t, cost.Request{CacheRead: 150_000, Input: 1_000, Output: 2_000}, sc.Request)
	// The cut past the cached prompt: the rest is fresh input too,
	// 150000·0.5 + 11000·5 + 2000·25 = 0.18, dearer than Haiku's 0.131.
	shape.FoldEnd = 160_000
	sc = cost.ChooseSummaryCall(opus, haiku, shape)
	assert.False(t, sc.Cached)
	assert.InDelta(t, 0.131, sc.USD, 1e-12)
	assert.Equal(t, cost.Request{Input: 121_000, Output: 2_000}, sc.Request)
	// At Opus's own prices the fresh call costs 0.655: the cached one wins.
	assert.True(t, cost.ChooseSummaryCall(opus, opus, shape).Cached)
	// A cold cache is never resent.
	shape.Cached = 0
	assert.False(t, cost.ChooseSummaryCall(opus, opus, shape).Cached)
}
