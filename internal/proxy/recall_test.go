package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/recall"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/redisstore"
	"github.com/compact-host/compact-host/host/store/storetest"
	"github.com/compact-host/compact-host/internal/mcptest"
	"github.com/compact-host/compact-host/internal/recallmcp"
	"github.com/compact-host/compact-host/internal/recallstore"
	"github.com/compact-host/compact-host/internal/tenant"
)

// toolOutput is the original output of call i of toolBody's conversation.
func toolOutput(tag string, i int) string {
	return fmt.Sprintf("ORIGINAL-%s-%02d: contents of parser_%d.go\n", tag, i, i) +
		strings.Repeat(fmt.Sprintf("func parse%d() { /* line of the file */ }\n", i), 40)
}

// toolBody is an Anthropic conversation of n turns, each a request, a
// Read of a file and its output of about 1.7 KB, and a reply.
func toolBody(t *testing.T, n int, tag string) []byte {
	var msgs []map[string]any
	for i := range n {
		msgs = append(msgs, map[string]any{"role": "user", "content": tag + " " + turnText(i)})
		if i == n-1 {
			break
		}
		id := fmt.Sprintf("toolu_%s_%02d", tag, i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": id, "name": "Read", "input": map[string]any{"path": fmt.Sprintf("parser_%d.go", i)}}}},
			map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": toolOutput(tag, i)}}},
			map[string]any{"role": "assistant", "content": []map[string]any{{"type": "text", "text": fmt.Sprintf("reply %d", i+1)}}},
		)
	}
	body, err := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": "You are a careful coding agent.", "messages": msgs})
	require.NoError(t, err)
	return body
}

var recallMarker = regexp.MustCompile(`\[recall:((?:s|t)-[0-9a-f]+)\]`)

// recallRig is a proxy on a disk store that serves the recall tools and
// hints them in its summaries; edit sets more options.
func recallRig(t *testing.T, st store.Store, edit ...func(*Options)) *rig {
	var calls atomic.Int32
	cfg := smallWindow
	cfg.Strategy, cfg.Fallbacks, cfg.RecallHint = "counting", []string{}, true
	return newRig(t, func(o *Options) {
		o.Store, o.Config, o.Offline, o.MCP = st, cfg, true, true
		o.EngineOptions = []host.Option{countingStrategy(&calls)}
		for _, e := range edit {
			e(o)
		}
	})
}

// sendTurn posts a conversation's turn under key and returns what reached
// the upstream.
func sendTurn(t *testing.T, r *rig, body []byte, key string) []byte {
	t.Helper()
	before := len(r.up.agentRequests())
	resp, _ := post(t, r.srv.URL+"/v1/messages", body, map[string]string{"X-Api-Key": key})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := r.up.agentRequests()
	require.Len(t, got, before+1)
	return got[before].Body
}

// mcpClient connects to the proxy's MCP endpoint sending header.
func mcpClient(t *testing.T, base string, header map[string]string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + MCPPath,
		HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: headerTransport(header)}}, nil)
}

type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// The proxy keeps what it folded in its disk store: every marker of the
// summary it wrote resolves through its MCP endpoint, for the credential
// that sent the conversation, to the original text; the summary says the
// tools exist. Another credential, or none, gets nothing of it.
func TestProxyRecallsWhatItFolded(t *testing.T) {
	disk, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
	require.NoError(t, err)
	r := recallRig(t, disk)
	const key = "sk-ant-api03-recall-owner"
	var summary string
	for n := 6; n <= 14 && summary == ""; n++ {
		got := sendTurn(t, r, toolBody(t, n, "mine"), key)
		if strings.Contains(string(got), "[recall:t-") {
			summary = string(got)
		}
	}
	require.NotEmpty(t, summary, "no compaction with a tool-output marker")
	assert.Contains(t, summary, mustJSONString(recall.Hint), "the summary tells the model the tools exist")
	refs := recallMarker.FindAllStringSubmatch(summary, -1)
	require.NotEmpty(t, refs)

	cs, err := mcpClient(t, r.srv.URL, map[string]string{"X-Api-Key": key})
	require.NoError(t, err)
	defer cs.Close()
	spans := 0
	for _, m := range refs {
		text, isErr := mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": m[1]})
		require.False(t, isErr, "recall of %s: %s", m[1], text)
		assert.Contains(t, text, "ORIGINAL-mine-", "the original behind %s", m[1])
		if strings.HasPrefix(m[1], "t-") {
			i := strings.Index(text, "ORIGINAL-mine-")
			var n int
			fmt.Sscanf(text[i:], "ORIGINAL-mine-%02d", &n)
			assert.Contains(t, text, toolOutput("mine", n), "the whole output of call %d, word for word", n)
		} else {
			spans++
		}
	}
	assert.Positive(t, spans, "the span marker resolves too")
	text, isErr := mcptest.Call(t, cs, recallmcp.ToolSearch, map[string]any{"query": "ORIGINAL-mine-01"})
	require.False(t, isErr, text)
	assert.Contains(t, text, "[recall:t-", text)

	// Calls at once, of the owner and of another credential, on one
	// endpoint: each gets its own tenant's answer.
	intruder, err := mcpClient(t, r.srv.URL, map[string]string{"Authorization": "Bearer sk-ant-api03-intruder"})
	require.NoError(t, err)
	defer intruder.Close()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			c := cs
			if i%2 == 1 {
				c = intruder
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: recallmcp.ToolRecall, Arguments: map[string]any{"ref": refs[i%len(refs)][1]}})
			if !assert.NoError(t, err) {
				return
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if i%2 == 1 {
				assert.True(t, res.IsError, text)
				assert.NotContains(t, text, "ORIGINAL")
			} else {
				assert.False(t, res.IsError, text)
				assert.Contains(t, text, "ORIGINAL-mine-")
			}
		})
	}
	wg.Wait()

	// Another credential: the same marker names nothing it can read.
	other, err := mcpClient(t, r.srv.URL, map[string]string{"X-Api-Key": "sk-ant-api03-someone-else"})
	require.NoError(t, err)
	defer other.Close()
	for _, tool := range []string{recallmcp.ToolRecall, recallmcp.ToolSearch} {
		text, isErr = mcptest.Call(t, other, tool, map[string]any{"ref": refs[0][1], "query": "ORIGINAL"})
		assert.True(t, isErr, "%s for another credential: %s", tool, text)
		assert.NotContains(t, text, "ORIGINAL")
	}
	// No credential at all: refused before MCP.
	_, err = mcpClient(t, r.srv.URL, nil)
	require.Error(t, err)
	resp, _ := post(t, r.srv.URL+MCPPath, []byte(`{}`), nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = post(t, r.srv.URL+MCPPath, []byte(strings.Repeat(" ", recallmcp.MaxBodyBytes+1)), map[string]string{"X-Api-Key": key})
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

func mustJSONString(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

// Two conversations of one credential: each marker resolves in its own,
// a conversation source refuses the other's markers, and the originals
// are kept once however often the conversation is compacted again.
func TestProxyKeepsEachConversationApart(t *testing.T) {
	disk, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
	require.NoError(t, err)
	r := recallRig(t, disk)
	const key = "sk-ant-api03-two-conversations"
	refOf := map[string]string{}
	for _, tag := range []string{"alpha", "beta"} {
		for n := 6; n <= 16; n++ {
			got := sendTurn(t, r, toolBody(t, n, tag), key)
			if m := regexp.MustCompile(`\[recall:(t-[0-9a-f]+)\]`).FindSubmatch(got); m != nil && refOf[tag] == "" {
				refOf[tag] = string(m[1])
			}
		}
		require.NotEmpty(t, refOf[tag], tag)
	}
	convs, err := recallstore.Conversations(context.Background(), disk, string(tenantOf(r, key)))
	require.NoError(t, err)
	require.Len(t, convs, 2)

	cs, err := mcpClient(t, r.srv.URL, map[string]string{"X-Api-Key": key})
	require.NoError(t, err)
	defer cs.Close()
	for tag, ref := range refOf {
		text, isErr := mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": ref})
		require.False(t, isErr, text)
		assert.Contains(t, text, "ORIGINAL-"+tag+"-")
	}
	// convs[0] is the newest: beta's. Alpha's marker is unknown there.
	beta := &recallmcp.StoreSource{Sessions: disk, Conversation: convs[0]}
	x, err := beta.IndexFor(context.Background(), refOf["alpha"])
	require.NoError(t, err)
	_, err = x.Recall(refOf["alpha"], 1)
	assert.ErrorIs(t, err, recall.ErrUnknownRef)
	_, err = x.Recall(refOf["beta"], 1)
	assert.NoError(t, err)

	// Each message is kept once: compacting again appends only what is new.
	o, err := recallstore.Load(context.Background(), disk, convs[0])
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, m := range o.Messages {
		assert.False(t, seen[m.ID], "message %s kept twice", m.ID)
		seen[m.ID] = true
	}
}

// Without MCP and with DiscardOriginals, nothing is served or kept, and
// no summary names the tools.
func TestProxyWithoutRecall(t *testing.T) {
	st := store.NewMemory()
	var calls atomic.Int32
	cfg := smallWindow
	cfg.Strategy, cfg.Fallbacks = "counting", []string{}
	r := newRig(t, func(o *Options) {
		o.Store, o.Config, o.Offline, o.DiscardOriginals = st, cfg, true, true
		o.EngineOptions = []host.Option{countingStrategy(&calls)}
	})
	var compacted []byte
	for n := 6; n <= 14 && compacted == nil; n++ {
		if got := sendTurn(t, r, toolBody(t, n, "plain"), "sk-ant-api03-plain"); strings.Contains(string(got), "[recall:") {
			compacted = got
		}
	}
	require.NotNil(t, compacted)
	assert.NotContains(t, string(compacted), "recall tool", "no hint without the tools")
	resp, _ := post(t, r.srv.URL+MCPPath, []byte(`{}`), map[string]string{"X-Api-Key": "sk-ant-api03-plain"})
	assert.NotEqual(t, http.StatusOK, resp.StatusCode, "no MCP endpoint without Options.MCP")
	convs, err := recallstore.Conversations(context.Background(), st, string(tenantOf(r, "sk-ant-api03-plain")))
	require.NoError(t, err)
	assert.Empty(t, convs, "no originals kept with DiscardOriginals")
}

// tenantOf is the tenant of requests sending key as x-api-key.
func tenantOf(r *rig, key string) string {
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/v1/messages", nil)
	req.Header.Set("X-Api-Key", key)
	return string(r.proxy.credentialsOf(req).tenant)
}

// Replicas sharing Redis and a tenant secret: what one folded, another's
// MCP endpoint recalls; a replica with another secret sees none of it.
func TestProxyReplicasRecallFromRedis(t *testing.T) {
	srv := storetest.StartRedis(t)
	secret, err := tenant.NewKeyer([]byte("a-shared-tenant-secret-of-32-bytes"))
	require.NoError(t, err)
	replica := func(keyer *tenant.Keyer) *rig {
		st, err := redisstore.Open(context.Background(), srv.URL()+"?call_timeout=5s", redisstore.Options{})
		require.NoError(t, err)
		return recallRig(t, st, func(o *Options) { o.TenantKeyer = keyer })
	}
	a, b, other := replica(secret), replica(secret), replica(tenant.NewRandomKeyer())
	const key = "sk-ant-api03-replicated"
	var ref string
	for n := 6; n <= 14 && ref == ""; n++ {
		if m := regexp.MustCompile(`\[recall:(t-[0-9a-f]+)\]`).FindSubmatch(sendTurn(t, a, toolBody(t, n, "shared"), key)); m != nil {
			ref = string(m[1])
		}
	}
	require.NotEmpty(t, ref)
	cs, err := mcpClient(t, b.srv.URL, map[string]string{"X-Api-Key": key})
	require.NoError(t, err)
	defer cs.Close()
	text, isErr := mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": ref})
	require.False(t, isErr, text)
	assert.Contains(t, text, "ORIGINAL-shared-")

	cs2, err := mcpClient(t, other.srv.URL, map[string]string{"X-Api-Key": key})
	require.NoError(t, err)
	defer cs2.Close()
	text, isErr = mcptest.Call(t, cs2, recallmcp.ToolRecall, map[string]any{"ref": ref})
	assert.True(t, isErr, text)
	assert.NotContains(t, text, "ORIGINAL")
}

// A compaction stored while the proxy named the recall tools is not
// spliced into a request once it no longer does: the request is compacted
// anew, without the line.
func TestStoredHintFollowsTheSetting(t *testing.T) {
	st := store.NewMemory()
	const key = "sk-ant-api03-hint-toggle"
	keyer := tenant.NewRandomKeyer() // one tenant across the two proxies
	with := recallRig(t, st, func(o *Options) { o.TenantKeyer = keyer })
	var hinted []byte
	n := 6
	for ; n <= 14 && hinted == nil; n++ {
		if got := sendTurn(t, with, toolBody(t, n, "toggle"), key); strings.Contains(string(got), mustJSONString(recall.Hint)) {
			hinted = got
		}
	}
	require.NotNil(t, hinted)
	spliced := sendTurn(t, with, toolBody(t, n, "toggle"), key)
	require.Contains(t, string(spliced), mustJSONString(recall.Hint), "the same proxy splices its stored compaction")
	without := recallRig(t, st, func(o *Options) { o.TenantKeyer, o.MCP, o.Config.RecallHint = keyer, false, false })
	got := sendTurn(t, without, toolBody(t, n, "toggle"), key)
	assert.Contains(t, string(got), "[recall:", "compacted")
	assert.NotContains(t, string(got), mustJSONString(recall.Hint), "a stored summary naming the tools was spliced")
	assert.Contains(t, without.logs.String(), `"msg":"compacted"`, "compacted anew")
}

// The same for a Chat Completions conversation: its system message sits
// among the messages, its outputs are "tool" messages.
func TestProxyRecallsAChatCompletionsConversation(t *testing.T) {
	r := recallRig(t, store.NewMemory())
	const key = "sk-openai-recall-owner"
	body := func(n int) []byte {
		msgs := []map[string]any{{"role": "system", "content": "You are a careful coding agent."}}
		for i := range n {
			msgs = append(msgs, map[string]any{"role": "user", "content": "chat " + turnText(i)})
			if i == n-1 {
				break
			}
			id := fmt.Sprintf("call_chat_%02d", i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": id, "type": "function", "function": map[string]any{"name": "read_file", "arguments": fmt.Sprintf(`{"path":"parser_%d.go"}`, i)}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": toolOutput("chat", i)},
				map[string]any{"role": "assistant", "content": fmt.Sprintf("reply %d", i+1)})
		}
		b, err := json.Marshal(map[string]any{"model": "gpt-4o", "max_completion_tokens": 1000, "messages": msgs})
		require.NoError(t, err)
		return b
	}
	var ref string
	for n := 6; n <= 14 && ref == ""; n++ {
		before := len(r.up.agentRequests())
		resp, _ := post(t, r.srv.URL+"/v1/chat/completions", body(n), map[string]string{"Authorization": "Bearer " + key})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		got := r.up.agentRequests()
		require.Len(t, got, before+1)
		if m := regexp.MustCompile(`\[recall:(t-[0-9a-f]+)\]`).FindSubmatch(got[before].Body); m != nil {
			ref = string(m[1])
		}
	}
	require.NotEmpty(t, ref, "no compaction with a tool-output marker")
	cs, err := mcpClient(t, r.srv.URL, map[string]string{"Authorization": "Bearer " + key})
	require.NoError(t, err)
	defer cs.Close()
	text, isErr := mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": ref})
	require.False(t, isErr, text)
	i := strings.Index(text, "ORIGINAL-chat-")
	require.GreaterOrEqual(t, i, 0, text)
	var n int
	fmt.Sscanf(text[i:], "ORIGINAL-chat-%02d", &n)
	assert.Contains(t, text, toolOutput("chat", n))
	assert.Contains(t, text, "[tool call read_file call_chat_")
}

// On its default memory store, which no other process reads, a proxy
// without MCP keeps no originals; with MCP it does, for its endpoint.
func TestDefaultStoreKeepsOriginalsOnlyForMCP(t *testing.T) {
	for _, withMCP := range []bool{false, true} {
		var calls atomic.Int32
		cfg := smallWindow
		cfg.Strategy, cfg.Fallbacks = "counting", []string{}
		r := newRig(t, func(o *Options) {
			o.Config, o.Offline, o.MCP = cfg, true, withMCP
			o.EngineOptions = []host.Option{countingStrategy(&calls)}
		})
		const key = "sk-ant-api03-default-store"
		compacted := false
		for n := 6; n <= 14 && !compacted; n++ {
			compacted = strings.Contains(string(sendTurn(t, r, toolBody(t, n, "default"), key)), "[recall:")
		}
		require.True(t, compacted)
		convs, err := recallstore.Conversations(context.Background(), r.proxy.o.Store.(store.Sessions), tenantOf(r, key))
		require.NoError(t, err)
		assert.Equal(t, withMCP, len(convs) == 1, "MCP %v: %d conversations kept", withMCP, len(convs))
	}
}
