package eval

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/cost"
)

// usageSession writes a Claude Code session whose responses record
// prompts of the given sizes (all read from the cache but the growth,
// written for 5 minutes), a minute apart, and returns its path.
func usageSession(t *testing.T, dir string, prompts ...int) string {
	t.Helper()
	var b strings.Builder
	t0 := time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)
	prev := 0
	for i, p := range prompts {
		at := t0.Add(time.Duration(i) * time.Minute).Format(time.RFC3339)
		read := min(prev, p)
		fmt.Fprintf(&b, `{"type":"user","uuid":"u%d","timestamp":%q,"message":{"role":"user","content":"step %d"}}`+"\n", i, at, i)
		fmt.Fprintf(&b, `{"type":"assistant","uuid":"a%d","timestamp":%q,"message":{"id":"msg_%d","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"done %d"}],"usage":{"input_tokens":0,"cache_read_input_tokens":%d,"cache_creation_input_tokens":%d,"output_tokens":100}}}`+"\n",
			i, at, i, i, read, p-read)
		prev = p
	}
	path := filepath.Join(dir, "session.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

func TestRunCostReplaysEveryPolicy(t *testing.T) {
	dir := t.TempDir()
	// 110k of a 136k budget (Sonnet's 200k window less its 64k output)
	// passes the gate's 75% (85% less the 10% reserve) on the fourth call.
	path := usageSession(t, dir, 60_000, 80_000, 100_000, 110_000, 114_000)
	noUsage := filepath.Join(dir, "request.json")
	require.NoError(t, os.WriteFile(noUsage, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), 0o644))

	rep, err := RunCost(CostOptions{Sessions: []string{path, noUsage}})
	require.NoError(t, err)
	assert.Equal(t, []string{"request.json: openai file records no usage"}, rep.Skipped)
	require.Len(t, rep.Sessions, 1)
	s := rep.Sessions[0]
	assert.Equal(t, "claude-sonnet-4-5", s.Model)
	assert.Equal(t, 5, s.Calls)
	assert.Equal(t, 136_000, s.Budget)
	assert.Equal(t, "5m", s.CacheTTL)

	var policies []string
	byName := map[string]PolicyCost{}
	for _, pc := range s.Policies {
		policies = append(policies, pc.Policy)
		byName[pc.Policy] = pc
	}
	assert.Equal(t, Policies, policies)
	// The recorded calls grow on a warm cache, as the replay models it:
	// the agent's replay is the bill.
	assert.InDelta(t, s.BilledUSD, byName[PolicyAgent].USD, 1e-9)
	// Nothing overflows: none compacts nothing and costs the same.
	assert.Zero(t, byName[PolicyNone].Compactions)
	assert.InDelta(t, s.BilledUSD, byName[PolicyNone].USD, 1e-9)
	// The threshold compacts at 110k (>= 75% of 136k); cache-aware keeps
	// the warm cache, being under 85%, halfway to the 95% emergency share.
	assert.Equal(t, 1, byName[PolicyThreshold].Compactions)
	assert.Zero(t, byName[PolicyCacheAware].Compactions)
	assert.Positive(t, byName[PolicyThreshold].SummaryUSD)

	// Totals sum the sessions.
	require.Len(t, rep.Totals, len(Policies))
	assert.Equal(t, byName[PolicyThreshold].USD, rep.Totals[2].USD)

	// --price replaces the catalog's prices: input and output at 1,
	// cache prices filled as input, so every prompt token costs 1.
	rep, err = RunCost(CostOptions{Sessions: []string{path}, Policies: []string{PolicyNone}, Prices: cost.Prices{Input: 1, Output: 1, CacheRead: 1, CacheWrite5m: 1, CacheWrite1h: 1}})
	require.NoError(t, err)
	assert.InDelta(t, float64(60_000+80_000+100_000+110_000+114_000+5*100)/1e6, rep.Sessions[0].BilledUSD, 1e-12)
	assert.InDelta(t, rep.Sessions[0].BilledUSD, rep.Totals[0].USD, 1e-12)

	_, err = RunCost(CostOptions{Sessions: []string{path}, Policies: []string{"cheapest"}})
	assert.ErrorContains(t, err, `policy "cheapest"`)
	_, err = RunCost(CostOptions{Sessions: []string{path}, ColdShare: 1.5})
	assert.Error(t, err)
	_, err = RunCost(CostOptions{Sessions: []string{noUsage}})
	assert.ErrorIs(t, err, ErrNoSessions)
	_, err = RunCost(CostOptions{Sessions: []string{filepath.Join(dir, "absent.jsonl")}})
	var se *SessionError
	assert.True(t, errors.As(err, &se), "a named file that cannot be read: %v", err)
}

func TestRunCostAtTheAgentsReplyReserve(t *testing.T) {
	path := usageSession(t, t.TempDir(), 60_000, 80_000, 100_000, 110_000, 114_000)
	rep, err := RunCost(CostOptions{Sessions: []string{path}, MaxOutputTokens: 32_000})
	require.NoError(t, err)
	// 200k less 32k: 110k is under 75% of 168k, so nothing is compacted.
	assert.Equal(t, 168_000, rep.Sessions[0].Budget)
	for _, pc := range rep.Sessions[0].Policies {
		assert.Zero(t, pc.Compactions, pc.Policy)
	}
}

// A sub-agent's calls, recorded in the main session's file between its
// own, are their own conversation: the sub-agent's small prompt is no
// compaction of the main one.
func TestRunCostReplaysASubAgentApart(t *testing.T) {
	dir := t.TempDir()
	path := usageSession(t, dir, 60_000, 80_000, 100_000)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"type":"progress","timestamp":"2026-02-08T11:02:30Z","data":{"type":"agent_progress","agentId":"a1","message":{"type":"assistant","message":{"id":"msg_s","model":"claude-sonnet-4-5","usage":{"input_tokens":0,"cache_creation_input_tokens":20000,"output_tokens":50}}}}}` + "\n" +
		`{"type":"assistant","uuid":"a9","timestamp":"2026-02-08T11:03:00Z","message":{"id":"msg_9","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":0,"cache_read_input_tokens":100000,"cache_creation_input_tokens":5000,"output_tokens":100}}}` + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	rep, err := RunCost(CostOptions{Sessions: []string{path}, Policies: []string{PolicyAgent}})
	require.NoError(t, err)
	s := rep.Sessions[0]
	assert.Equal(t, 5, s.Calls)
	assert.Zero(t, s.Policies[0].Compactions)
	assert.Zero(t, s.HeadTokens)
	// Each conversation grows on its own warm cache: the replay is the bill.
	assert.InDelta(t, s.BilledUSD, s.Policies[0].USD, 1e-9)
}
