package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
)

// cachedRig is a proxy whose summaries go to the conversation's own
// model (so a summary call over the warm cache costs less than a fresh
// one), before a caching upstream, on an injected clock.
func cachedRig(t *testing.T, edit func(*cachingUpstream)) (*clock, *cachingUpstream, *agentScript, string) {
	clk, up, base := cachedProxy(t, "claude-sonnet-4-5", edit)
	a := &agentScript{t: t, url: base, key: "sk-ant-tenant-a"}
	a.send()
	for i := 0; !compacted(t, base); i++ {
		require.Less(t, i, 40, "no compaction")
		clk.advance(time.Minute)
		a.send() // every request answered, whatever the summary calls did
	}
	return clk, up, a, base
}

// cachedProxy is the proxy of cachedRig, its summaries asked of model, and
// its upstream, edited first.
func cachedProxy(t *testing.T, model string, edit func(*cachingUpstream)) (*clock, *cachingUpstream, string) {
	clk := &clock{t: time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)}
	up := newCachingUpstream(t, clk)
	if edit != nil {
		edit(up)
	}
	u, err := url.Parse(up.srv.URL)
	require.NoError(t, err)
	p, err := New(Options{Upstream: u, Config: smallWindow, Registry: registry, CompactionModel: model, Now: clk.Now,
		ProviderMaxRetries: -1, MetricsToken: "admin-secret", Logger: newJSONLogger(io.Discard)})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return clk, up, srv.URL
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
// the cost is the one the upstream's usage gives. The next compaction does
// the same over a prompt that carries the first one's summary.
func TestCachedPromptSummaryCall(t *testing.T) {
	clk, up, a, base := cachedRig(t, nil)
	assert.Equal(t, 1.0, compactions(t, base, host.StrategyCachedPrompt))
	up.mu.Lock()
	require.Len(t, up.cached, 1)
	assert.Zero(t, up.freshTries, "the strategy's fresh call was made too")
	require.GreaterOrEqual(t, len(up.agent), 2)
	// The request before the compacted one is the prompt cached.
	checkCachedCall(t, up.cached[0], up.agent[len(up.agent)-2])
	// The summary went where the strategy's would: into the next request.
	assert.Contains(t, string(up.agent[len(up.agent)-1].body), "Fix the parser.")
	call := up.cached[0]
	up.mu.Unlock()

	// The cost reported is the call's own usage at the model's prices.
	m, ok := catalog.Lookup("claude-sonnet-4-5")
	require.True(t, ok)
	first := cost.Request{Input: call.fresh, CacheRead: call.read, Output: 120}.USD(m.Prices())
	assert.InDelta(t, first, metric(t, base, `compact_host_proxy_summary_cost_usd_total{model="claude-sonnet-4-5"}`), 1e-9)

	// The next compaction resends a prompt that opens with the first
	// one's summary, as the requests since carried it.
	for i := 0; compactions(t, base, host.StrategyCachedPrompt) < 2; i++ {
		require.Less(t, i, 40, "no second compaction")
		clk.advance(time.Minute)
		a.send()
	}
	up.mu.Lock()
	require.Len(t, up.cached, 2)
	assert.Zero(t, up.freshTries)
	prev := up.agent[len(up.agent)-2]
	assert.Contains(t, string(prev.body), "Fix the parser.", "the cached prompt does not carry the first summary")
	checkCachedCall(t, up.cached[1], prev)
	call = up.cached[1]
	up.mu.Unlock()
	second := cost.Request{Input: call.fresh, CacheRead: call.read, Output: 120}.USD(m.Prices())
	assert.InDelta(t, first+second, metric(t, base, `compact_host_proxy_summary_cost_usd_total{model="claude-sonnet-4-5"}`), 1e-9)
}

// checkCachedCall checks a summary call over the cached prompt of the
// request prev: prev's bytes up to its last message, that message keyed
// the same and marked, the instruction after it, stream off; billed as
// reads of prev's whole prompt, nothing written.
func checkCachedCall(t *testing.T, call, prev billed) {
	t.Helper()
	sent, err := scanRequest(call.body)
	require.NoError(t, err)
	before, err := scanRequest(prev.body)
	require.NoError(t, err)
	require.Len(t, sent.msgs, len(before.msgs)+1, "the previous request's messages and the instruction")
	last := len(before.msgs) - 1
	assert.True(t, bytes.HasPrefix(call.body, prev.body[:before.msgs[last].start]),
		"the summary call does not start with the previous request's bytes:\n%.200s\n%.200s", call.body, prev.body)
	assert.Equal(t, string(before.field("system")), string(sent.field("system")))
	assert.Equal(t, string(cacheKey(before.msg(last))), string(cacheKey(sent.msg(last))), "the last cached message changed")
	assert.Contains(t, string(sent.msg(last)), `"cache_control":{"type":"ephemeral"}`, "no breakpoint where the previous request cached")
	instr := string(sent.msg(len(sent.msgs) - 1))
	assert.Contains(t, instr, `"role":"user"`)
	assert.Contains(t, instr, "This conversation is being compacted")
	assert.Contains(t, instr, "do not call any tool")
	assert.Contains(t, instr, "## Active Task")
	assert.Equal(t, "false", string(sent.field("stream")))
	assert.Equal(t, prev.read+prev.write, call.read)
	assert.Positive(t, call.read)
	assert.Zero(t, call.write)
}

// Hostile upstreams: the summary call over the cache fails, and the
// strategy's fresh call makes the summary; both fail, and the fallback
// strategy (offline) compacts. Every request is answered either way.
func TestCachedPromptSummaryCallFails(t *testing.T) {
	t.Run("cached call refused", func(t *testing.T) {
		_, up, _, base := cachedRig(t, func(u *cachingUpstream) { u.failCached = true })
		assert.Equal(t, 1.0, compactions(t, base, "structured"))
		assert.Zero(t, compactions(t, base, host.StrategyCachedPrompt))
		up.mu.Lock()
		defer up.mu.Unlock()
		assert.Positive(t, up.fresh)
		assert.Contains(t, string(up.agent[len(up.agent)-1].body), "Fix the parser.")
	})
	t.Run("every summary call refused", func(t *testing.T) {
		_, up, a, base := cachedRig(t, func(u *cachingUpstream) { u.failCached, u.failFresh = true, true })
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

// The official SDK as Claude Code uses the API: tools, thinking, the
// system prompt and the newest message marked for a 1-hour cache, the
// marker moving to the new last message each turn. The summary call
// resends the tools and thinking as they were (a change would miss the
// cache), puts the client's own marker back where the previous request
// had it, and is billed as reads of that whole prompt.
func TestCachedPromptSummaryCallFromTheSDK(t *testing.T) {
	clk, up, base := cachedProxy(t, "claude-sonnet-4-5", nil)
	client := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey(testKey), aoption.WithMaxRetries(0))
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name: "read_file", Description: anthropic.String("Read a file"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}},
	}}}
	hour := anthropic.CacheControlEphemeralParam{TTL: anthropic.CacheControlEphemeralTTLTTL1h}
	var history []anthropic.MessageParam
	for i := 0; compactions(t, base, host.StrategyCachedPrompt) == 0; i++ {
		require.Less(t, i, 30, "no compaction")
		id := fmt.Sprintf("toolu_%02d", i)
		history = append(history,
			anthropic.NewUserMessage(anthropic.NewTextBlock(turnText(i))),
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(id, map[string]any{"path": fmt.Sprintf("parser_%d.go", i)}, "read_file")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, fmt.Sprintf("package parser // file %d", i), false)))
		// The newest message alone carries the conversation's marker.
		msgs := append([]anthropic.MessageParam(nil), history...)
		marked := *history[len(history)-1].Content[0].OfToolResult
		marked.CacheControl = hour
		msgs[len(msgs)-1] = anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfToolResult: &marked})
		clk.advance(time.Minute)
		m, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model: "claude-sonnet-4-5", MaxTokens: 2000, Messages: msgs, Tools: tools,
			System:   []anthropic.TextBlockParam{{Text: cacheSystem, CacheControl: hour}},
			Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
		})
		require.NoError(t, err)
		history = append(history, m.ToParam())
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	require.Len(t, up.cached, 1)
	call := up.cached[0]
	prev := up.agent[len(up.agent)-2]
	sent, err := scanRequest(call.body)
	require.NoError(t, err)
	before, err := scanRequest(prev.body)
	require.NoError(t, err)
	for _, k := range []string{"tools", "thinking", "system", "max_tokens", "model"} {
		assert.Equal(t, string(before.field(k)), string(sent.field(k)), "%s changed", k)
	}
	require.Len(t, sent.msgs, len(before.msgs)+1)
	last := len(before.msgs) - 1
	assert.True(t, bytes.HasPrefix(call.body, prev.body[:before.msgs[last].start]), "the summary call does not start with the previous request's bytes")
	assert.Equal(t, string(cacheKey(before.msg(last))), string(cacheKey(sent.msg(last))))
	assert.Contains(t, string(sent.msg(last)), `"ttl":"1h"`, "the client's marker is not where the previous request had it")
	assert.Equal(t, 1, bytes.Count(sent.field("messages"), cacheControlKey), "markers in the messages: the resent last one's alone")
	assert.Equal(t, prev.read+prev.write, call.read)
	assert.Zero(t, call.write)
	assert.Contains(t, string(sent.msg(len(sent.msgs)-1)), "This conversation is being compacted")
}

// Chat Completions caches a prompt's prefix by itself: from the official
// OpenAI SDK, the summary call resends the previous request's messages
// byte for byte, with no marker, and the instruction; the upstream bills
// that whole prompt as cached, and the cost is the call's usage.
func TestCachedPromptSummaryCallChatCompletions(t *testing.T) {
	clk, up, base := cachedProxy(t, "gpt-4o", nil)
	client := openai.NewClient(ooption.WithBaseURL(base+"/v1"), ooption.WithAPIKey("sk-proj-cachetest"), ooption.WithMaxRetries(0))
	history := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(cacheSystem)}
	for i := 0; compactions(t, base, host.StrategyCachedPrompt) == 0; i++ {
		require.Less(t, i, 30, "no compaction")
		history = append(history, openai.UserMessage(turnText(i)))
		clk.advance(time.Minute)
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "gpt-4o", Messages: history, MaxCompletionTokens: openai.Int(1000),
		})
		require.NoError(t, err)
		require.NotEmpty(t, resp.Choices)
		history = append(history, resp.Choices[0].Message.ToParam())
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	require.Len(t, up.cached, 1)
	assert.Zero(t, up.freshTries, "the strategy's fresh call was made too")
	call, prev := up.cached[0], up.agent[len(up.agent)-2]
	sent, err := scanRequest(call.body)
	require.NoError(t, err)
	before, err := scanRequest(prev.body)
	require.NoError(t, err)
	require.Len(t, sent.msgs, len(before.msgs)+1)
	assert.True(t, bytes.HasPrefix(call.body, prev.body[:before.msgs[len(before.msgs)-1].end]),
		"the summary call does not start with the previous request's messages:\n%.300s\n%.300s", call.body, prev.body)
	assert.NotContains(t, string(call.body), "cache_control")
	assert.Contains(t, string(sent.msg(len(sent.msgs)-1)), "This conversation is being compacted")
	assert.Equal(t, prev.read+prev.fresh, call.read, "the previous prompt was not read whole from the cache")
	assert.Contains(t, string(up.agent[len(up.agent)-1].body), "Fix the parser.")

	m, ok := catalog.Lookup("gpt-4o")
	require.True(t, ok)
	want := cost.Request{Input: call.fresh, CacheRead: call.read, Output: 120}.USD(m.Prices())
	up.mu.Unlock()
	got := metric(t, base, `compact_host_proxy_summary_cost_usd_total{model="gpt-4o"}`)
	up.mu.Lock()
	assert.InDelta(t, want, got, 1e-9)
}
