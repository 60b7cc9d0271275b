package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
)

// cachedRig is a proxy whose summaries go to the conversation's own
// model (so a summary call over the warm cache costs less than a fresh
// one), before a caching upstream, on an injected clock.
func cachedRig(t *testing.T, edit func(*cachingUpstream)) (*cachingUpstream, *agentScript, string) {
	clk := &clock{t: time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)}
	up := newCachingUpstream(t, clk)
	if edit != nil {
		edit(up)
	}
	u, err := url.Parse(up.srv.URL)
	require.NoError(t, err)
	p, err := New(Options{Upstream: u, Config: smallWindow, Registry: registry, CompactionModel: "claude-sonnet-4-5", Now: clk.Now,
		ProviderMaxRetries: -1, MetricsToken: "admin-secret", Logger: newJSONLogger(io.Discard)})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	a := &agentScript{t: t, url: srv.URL, key: "sk-ant-tenant-a"}
	a.send()
	for i := 0; metric(t, srv.URL, "compact_host_proxy_compactions_total") == 0 && !compacted(t, srv.URL); i++ {
		require.Less(t, i, 40, "no compaction")
		clk.advance(time.Minute)
		a.send() // every request answered, whatever the summary calls did
	}
	return up, a, srv.URL
}

// compacted reports whether the proxy made any compaction.
func compacted(t *testing.T, base string) bool {
	_, data := admin(t, base, "metrics", "")
	return strings.Contains(string(data), `compact_host_proxy_compactions_total{`)
}

func compactions(t *testing.T, base, strategy string) float64 {
	return metric(t, base, `compact_host_proxy_compactions_total{strategy="`+strategy+`",trigger="gate"}`)
}

// A compaction on a warm cache asks the conversation's own model with
// the previous request as it was, byte for byte up to its last message,
// which gets the client's cache_control marker, and the instruction
// appended: the upstream bills the whole previous prompt as cache reads,
// the strategy's fresh call is never made, the summary is spliced in, and
// the cost is the one the upstream's usage gives.
func TestCachedPromptSummaryCall(t *testing.T) {
	up, _, base := cachedRig(t, nil)
	assert.Equal(t, 1.0, compactions(t, base, host.StrategyCachedPrompt))
	up.mu.Lock()
	defer up.mu.Unlock()
	require.Len(t, up.cached, 1)
	assert.Zero(t, up.freshTries, "the strategy's fresh call was made too")
	call := up.cached[0]
	require.GreaterOrEqual(t, len(up.agent), 2)
	prev := up.agent[len(up.agent)-2] // the request before the compacted one

	sent, err := scanRequest(call.body)
	require.NoError(t, err)
	before, err := scanRequest(prev.body)
	require.NoError(t, err)
	require.Len(t, sent.msgs, len(before.msgs)+1, "the previous request's messages and the instruction")
	last := len(before.msgs) - 1
	assert.True(t, bytes.HasPrefix(call.body, prev.body[:before.msgs[last].start]),
		"the summary call does not start with the previous request's bytes:\n%s\n%s", call.body[:200], prev.body[:200])
	assert.Equal(t, string(before.field("system")), string(sent.field("system")))
	assert.Equal(t, string(cacheKey(before.msg(last))), string(cacheKey(sent.msg(last))), "the last cached message changed")
	assert.Contains(t, string(sent.msg(last)), `"cache_control":{"type":"ephemeral"}`, "no breakpoint where the previous request cached")
	instr := string(sent.msg(len(sent.msgs) - 1))
	assert.Contains(t, instr, `"role":"user"`)
	assert.Contains(t, instr, "This conversation is being compacted")
	assert.Contains(t, instr, "do not call any tool")
	assert.Contains(t, instr, "## Active Task")
	assert.Equal(t, "false", string(sent.field("stream")))

	// Billed as reads of the whole previous prompt, nothing written.
	assert.Equal(t, prev.read+prev.write, call.read)
	assert.Zero(t, call.write)
	assert.Positive(t, call.read)

	// The summary went where the strategy's would: into the next request.
	assert.Contains(t, string(up.agent[len(up.agent)-1].body), "Fix the parser.")

	// The cost reported is the call's own usage at the model's prices.
	m, ok := catalog.Lookup("claude-sonnet-4-5")
	require.True(t, ok)
	want := cost.Request{Input: call.fresh, CacheRead: call.read, Output: 120}.USD(m.Prices())
	up.mu.Unlock()
	got := metric(t, base, `compact_host_proxy_summary_cost_usd_total{model="claude-sonnet-4-5"}`)
	up.mu.Lock()
	assert.InDelta(t, want, got, 1e-9)
}

// Hostile upstreams: the summary call over the cache fails, and the
// strategy's fresh call makes the summary; both fail, and the fallback
// strategy (offline) compacts. Every request is answered either way.
func TestCachedPromptSummaryCallFails(t *testing.T) {
	t.Run("cached call refused", func(t *testing.T) {
		up, _, base := cachedRig(t, func(u *cachingUpstream) { u.failCached = true })
		assert.Equal(t, 1.0, compactions(t, base, "structured"))
		assert.Zero(t, compactions(t, base, host.StrategyCachedPrompt))
		up.mu.Lock()
		defer up.mu.Unlock()
		assert.Positive(t, up.fresh)
		assert.Contains(t, string(up.agent[len(up.agent)-1].body), "Fix the parser.")
	})
	t.Run("every summary call refused", func(t *testing.T) {
		up, a, base := cachedRig(t, func(u *cachingUpstream) { u.failCached, u.failFresh = true, true })
		// The configured fallback, the offline truncate strategy.
		assert.Equal(t, 1.0, compactions(t, base, "truncate"))
		assert.Zero(t, compactions(t, base, host.StrategyCachedPrompt)+compactions(t, base, "structured"))
		up.mu.Lock()
		assert.Positive(t, up.freshTries)
		last := up.agent[len(up.agent)-1].body
		up.mu.Unlock()
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(last, &req))
		assert.Less(t, len(req.Messages), len(a.msgs), "the emergency compaction was not sent")
	})
}
