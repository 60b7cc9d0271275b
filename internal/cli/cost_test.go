package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// usageTurn is one exchange of a Claude Code session and the usage its
// response records.
type usageTurn struct {
	at    time.Time
	usage string // the message.usage object
}

// claudeCodeWithUsage writes a Claude Code session of the turns, each a
// user request and a response long enough to fold.
func claudeCodeWithUsage(t *testing.T, turns []usageTurn) string {
	t.Helper()
	var b strings.Builder
	parent := ""
	line := func(typ, uuid string, at time.Time, msg string) {
		fmt.Fprintf(&b, `{"type":%q,"uuid":%q,"parentUuid":%q,"sessionId":"s1","timestamp":%q,"message":%s}`+"\n",
			typ, uuid, parent, at.UTC().Format(time.RFC3339Nano), msg)
		parent = uuid
	}
	text := func(s string) string { js, _ := json.Marshal(s); return string(js) }
	for i, tu := range turns {
		long := strings.Repeat(fmt.Sprintf("step %d of the refund fix: read ledger.go, ran the tests. ", i), 40)
		line("user", fmt.Sprintf("u%d", i), tu.at.Add(-time.Second), fmt.Sprintf(`{"role":"user","content":%s}`, text(fmt.Sprintf("request %d: go on with the fix", i))))
		line("assistant", fmt.Sprintf("a%d", i), tu.at, fmt.Sprintf(`{"id":"msg_%d","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":%s}],"usage":%s}`, i, text(long), tu.usage))
	}
	return writeFile(t, "session.jsonl", b.String())
}

func threeTurns(last time.Time) []usageTurn {
	return []usageTurn{
		{last.Add(-4 * time.Minute), `{"input_tokens":3,"cache_creation_input_tokens":1000,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":1000},"output_tokens":20}`},
		{last.Add(-2 * time.Minute), `{"input_tokens":2,"cache_creation_input_tokens":500,"cache_read_input_tokens":1000,"output_tokens":30}`},
		{last, `{"input_tokens":1,"cache_creation_input_tokens":200,"cache_read_input_tokens":1500,"cache_creation":{"ephemeral_5m_input_tokens":200,"ephemeral_1h_input_tokens":0},"output_tokens":40}`},
	}
}

func TestInspectBillsRecordedUsage(t *testing.T) {
	path := claudeCodeWithUsage(t, threeTurns(time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)))
	var rep inspectReport
	r := runCLI(t, runOpts{}, "inspect", "--json", path)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.NotNil(t, rep.Cost)
	// At Sonnet's prices (3 in, 15 out, 0.3 read, 3.75 5m write, 6 1h write):
	// 3·3 + 1000·6 + 20·15 = 6309; 2·3 + 1000·0.3 + 500·3.75 + 30·15 = 2631;
	// 1·3 + 1500·0.3 + 200·3.75 + 40·15 = 1803, in millionths of a dollar.
	assert.InDelta(t, 0.010743, rep.Cost.Billed.USD, 1e-12)
	assert.Equal(t, 3, rep.Cost.Requests)
	assert.Equal(t, []string{"claude-sonnet-4-5"}, rep.Cost.Models)
	assert.Equal(t, "catalog", rep.Cost.PriceSource)
	assert.Equal(t, 1000, rep.Cost.Billed.CacheWrite1h)
	assert.Equal(t, 700, rep.Cost.Billed.CacheWrite5m)

	// --price replaces the catalog's; cache prices left out bill as input:
	// (6 + 2500 + 1700)·1 + 90·2.
	r = runCLI(t, runOpts{}, "inspect", "--json", "--price", "input=1,output=2", path)
	require.Equal(t, ExitOK, r.code, r.stderr)
	rep = inspectReport{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.InDelta(t, 0.004386, rep.Cost.Billed.USD, 1e-12)
	assert.Equal(t, "--price", rep.Cost.PriceSource)

	r = runCLI(t, runOpts{}, "inspect", path)
	assert.Contains(t, r.stdout, "cost: $0.0107 billed for 3 model calls the file records (claude-sonnet-4-5, catalog prices)")

	// A session file that records no usage has no cost.
	r = runCLI(t, runOpts{}, "inspect", "--json", sampleSession(t))
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout, `"cost"`)
}

func TestCostFlagsRefuseBadValues(t *testing.T) {
	path := claudeCodeWithUsage(t, threeTurns(time.Now()))
	for _, args := range [][]string{
		{"inspect", "--price", "input=3", path},
		{"inspect", "--price", "input=3,output=-1", path},
		{"compact", "--dry-run", "--price", "in=3,out=15", path},
		{"compact", "--dry-run", "--cache-ttl", "10m", path},
	} {
		r := runCLI(t, runOpts{}, args...)
		assert.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		assert.Contains(t, r.stderr, args[len(args)-3], "%v: the error names the flag", args)
	}
}

func TestCompactReportsTheRewriteItCauses(t *testing.T) {
	compact := func(t *testing.T, last time.Time, extra ...string) compactReport {
		t.Helper()
		path := claudeCodeWithUsage(t, threeTurns(last))
		args := append([]string{"compact", "--dry-run", "--json", "--context-window", "8k", "--keep-recent", "300"}, extra...)
		r := runCLI(t, runOpts{}, append(args, path)...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		var rep compactReport
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
		require.NotNil(t, rep.Cost, r.stdout)
		require.Less(t, rep.TokensAfter, rep.TokensBefore)
		return rep
	}
	before, after := func(r compactReport) float64 { return float64(r.TokensBefore) }, func(r compactReport) float64 { return float64(r.TokensAfter) }

	// The latest call was a minute ago and wrote a 5-minute entry: the
	// cache is warm, so without the compaction the next request reads the
	// old prompt at 0.3, and with it writes the new one at 3.75.
	warm := compact(t, time.Now().Add(-time.Minute))
	assert.Equal(t, "warm", warm.Cost.Cache)
	assert.Equal(t, "5m", warm.Cost.CacheTTL)
	assert.Equal(t, "claude-sonnet-4-5", warm.Cost.Model)
	assert.InDelta(t, after(warm)*3.75/1e6, warm.Cost.RewriteUSD, 1e-12)
	assert.InDelta(t, before(warm)*0.3/1e6, warm.Cost.UncompactedUSD, 1e-12)
	assert.InDelta(t, (before(warm)-after(warm))*0.3/1e6, warm.Cost.SavedPerRequestUSD, 1e-12)
	assert.Greater(t, warm.Cost.BreakEvenRequests, 1, "a warm cache is cheap to keep reading")

	// Two hours later a 5-minute entry has expired: the old prompt would
	// be written anew, dearer than the shorter one.
	cold := compact(t, time.Now().Add(-2*time.Hour))
	assert.Equal(t, "expired", cold.Cost.Cache)
	assert.InDelta(t, before(cold)*3.75/1e6, cold.Cost.UncompactedUSD, 1e-12)
	assert.Equal(t, 1, cold.Cost.BreakEvenRequests)

	// With a 1-hour cache the same pause keeps it expired and writes cost 6.
	hour := compact(t, time.Now().Add(-2*time.Hour), "--cache-ttl", "1h")
	assert.Equal(t, "1h", hour.Cost.CacheTTL)
	assert.InDelta(t, after(hour)*6/1e6, hour.Cost.RewriteUSD, 1e-12)
}

func TestEvalCost(t *testing.T) {
	path := claudeCodeWithUsage(t, threeTurns(time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)))
	r := runCLI(t, runOpts{}, "eval", "--cost", path)
	require.Equal(t, ExitOK, r.code, r.stderr)
	for _, p := range []string{"agent", "none", "threshold", "cache-aware", "claude-sonnet-4-5", "$0.01"} {
		assert.Contains(t, r.stdout, p)
	}
	r = runCLI(t, runOpts{}, "eval", "--cost", "--json", "--policy", "none", path)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var rep struct {
		Sessions []struct {
			BilledUSD float64 `json:"billed_usd"`
			Policies  []struct {
				Policy string  `json:"policy"`
				USD    float64 `json:"usd"`
			} `json:"policies"`
		} `json:"sessions"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Len(t, rep.Sessions, 1)
	assert.InDelta(t, 0.010743, rep.Sessions[0].BilledUSD, 1e-12)
	require.Len(t, rep.Sessions[0].Policies, 1)
	assert.Equal(t, "none", rep.Sessions[0].Policies[0].Policy)

	for _, args := range [][]string{
		{"eval", "--cost", "--policy", "cache_aware", path},
		{"eval", "--cost", "--cold-share", "0", path},
		{"eval", "--cost", "--strategy", "structured", path},
		{"eval", "--cost", "--price", "input=x", path},
		{"eval", "--cost", "--max-output-tokens", "lots", path},
		{"eval", "--max-output-tokens", "32k", path},
	} {
		r := runCLI(t, runOpts{}, args...)
		assert.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
	}
	r = runCLI(t, runOpts{}, "eval", "--cost", "--policy", "cache_aware", path)
	assert.Contains(t, r.stderr, "cache-aware")
	r = runCLI(t, runOpts{}, "eval", "--cost", sampleSession(t))
	assert.Equal(t, ExitInput, r.code, r.stderr)

	// --charts draws each session's cost over time; a directory that
	// cannot be made fails with a clear error.
	charts := filepath.Join(t.TempDir(), "charts")
	r = runCLI(t, runOpts{}, "eval", "--cost", "--charts", charts, path)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "wrote 1 charts to "+charts)
	svg, err := os.ReadFile(filepath.Join(charts, strings.TrimSuffix(filepath.Base(path), ".jsonl")+".cost.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(svg), `data-policy="cache-aware"`)
	r = runCLI(t, runOpts{}, "eval", "--cost", "--charts", filepath.Join(path, "charts"), path)
	assert.NotEqual(t, ExitOK, r.code)
	assert.Contains(t, r.stderr, "eval: charts:")

	// The reply reserve the agent used sizes the budget.
	r = runCLI(t, runOpts{}, "eval", "--cost", "--json", "--max-output-tokens", "32k", path)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"budget": 168000`)
}
