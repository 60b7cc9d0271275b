package recallmcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/host/recall"
	"github.com/compact-host/compact-host/internal/mcptest"
	"github.com/compact-host/compact-host/internal/recallmcp"
	"github.com/compact-host/compact-host/internal/server"
	"github.com/compact-host/compact-host/internal/testwasm"
)

// startServe runs compact-host serve's API on loopback, with two tokens
// (two tenants), offline summaries and a small window.
func startServe(t testing.TB) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	cache, err := testwasm.ShareCompiled(filepath.Join(dir, "wazero"))
	require.NoError(t, err)
	reg, err := plugin.NewRegistry(context.Background(), plugin.Options{
		Wasm: wasm.Runtime, Builtins: wasm.Builtins, PluginsDir: filepath.Join(dir, "plugins"), CacheDir: cache, NoWatch: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })
	s, err := server.New(server.Options{
		Config: host.Config{ContextWindow: 20000, MaxOutputTokens: 2000, Tokenizer: "chars"}, Registry: reg,
		Version: "test", Logger: slog.New(slog.DiscardHandler),
		Tokens: []server.Token{{Name: "alice", Secret: "alice-token"}, {Name: "bob", Secret: "bob-token"}},
	})
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// turns are n turns of a coding conversation from turn from, each a
// tool call whose 3 KB output holds "needle-<tag>-<turn> found".
func turns(tag string, from, n int) []abi.Message {
	var msgs []abi.Message
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("call_%s_%d", tag, i)
		msgs = append(msgs,
			abi.Message{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: fmt.Sprintf("Reading part %d.", i)}, {Type: abi.BlockToolUse, ID: id, Name: "Bash", Input: []byte(`{"command":"cat part.txt"}`)}}},
			abi.Message{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: id, Text: fmt.Sprintf("needle-%s-%d found\n", tag, i) + strings.Repeat(fmt.Sprintf("line %d of the output of part %d\n", i, i), 100)}}},
		)
	}
	return msgs
}

func serveCall(t testing.TB, ts *httptest.Server, token, method, path string, body any) (int, []byte) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(method, ts.URL+path, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b.Bytes()
}

func putServeSession(t testing.TB, ts *httptest.Server, token, id string, msgs []abi.Message) {
	t.Helper()
	status, body := serveCall(t, ts, token, http.MethodPut, "/v1/sessions/"+id, map[string]any{"session": msgs})
	require.Equal(t, http.StatusCreated, status, "%s", body)
}

func appendServeSession(t *testing.T, ts *httptest.Server, token, id string, msgs []abi.Message) server.SessionUpdate {
	t.Helper()
	status, body := serveCall(t, ts, token, http.MethodPost, "/v1/sessions/"+id+"/messages", map[string]any{"messages": msgs})
	require.Equal(t, http.StatusOK, status, "%s", body)
	var up server.SessionUpdate
	require.NoError(t, json.Unmarshal(body, &up))
	return up
}

func serveSummary(t *testing.T, ts *httptest.Server, token, id string) string {
	t.Helper()
	status, body := serveCall(t, ts, token, http.MethodGet, "/v1/sessions/"+id, nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var v server.SessionView
	require.NoError(t, json.Unmarshal(body, &v))
	return v.Summary
}

// A session compacted twice by serve: the MCP server reads it with the
// session's token and recalls, word for word, the tool outputs behind the
// markers of the summary serve returned (those of both compactions: the
// second summary carries the first's), and finds them by search. Another
// token, another session's marker, a mangled ID, a wrong token and an
// answer over the limit are tool errors that show nothing of the session.
func TestServeSessionRecall(t *testing.T) {
	ts := startServe(t)
	opening := []abi.Message{
		{Role: abi.RoleSystem, Content: []abi.Block{{Type: abi.BlockText, Text: "You are a careful coding agent."}}},
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Read every part and fix the checkpoint bug."}}},
	}
	putServeSession(t, ts, "alice-token", "ticket-1", append(opening, turns("one", 0, 30)...))
	first := serveSummary(t, ts, "alice-token", "ticket-1")
	require.NotEmpty(t, first, "the PUT compacted the session")
	up := appendServeSession(t, ts, "alice-token", "ticket-1", turns("one", 30, 30))
	require.Equal(t, 2, up.Compactions, "the append compacted the session again")
	summary := serveSummary(t, ts, "alice-token", "ticket-1")

	src := &recallmcp.ServeSource{URL: ts.URL, Session: "ticket-1", Token: "alice-token"}
	cs := connect(t, recallmcp.NewServer(src, "test"))
	var tools []string
	for _, ref := range abi.MarkersIn(summary) {
		if strings.HasPrefix(ref, "t-") {
			tools = append(tools, ref)
		}
	}
	require.NotEmpty(t, tools, "the summary names tool outputs: %s", summary)
	early, late := 0, 0
	for _, ref := range tools {
		text, isErr := mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": "[recall:" + ref + "]"})
		require.False(t, isErr, "%s: %s", ref, text)
		require.Contains(t, text, "needle-one-")
		assert.Contains(t, text, "of the output of part", "the output word for word")
		var turn int
		_, err := fmt.Sscanf(text[strings.Index(text, "needle-one-"):], "needle-one-%d found", &turn)
		require.NoError(t, err)
		if turn < 30 {
			early++
		} else {
			late++
		}
	}
	assert.Positive(t, early, "markers of the first compaction, carried by the second summary, resolve")
	assert.Positive(t, late, "markers of the second compaction resolve")
	for _, ref := range abi.MarkersIn(summary) {
		if strings.HasPrefix(ref, "s-") {
			text, isErr := mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": ref})
			require.False(t, isErr, "%s: %s", ref, text)
			assert.Contains(t, text, "needle-one-")
		}
	}

	text, isErr := mcptest.Call(t, cs, recallmcp.ToolSearch, map[string]any{"query": `needle-one-4\d found`, "regexp": true, "limit": 50})
	require.False(t, isErr, text)
	assert.Equal(t, 10, strings.Count(text, "[recall:t-"), text)
	ref := text[strings.Index(text, "[recall:")+len("[recall:") : strings.Index(text, "]")]
	text, isErr = mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": ref})
	require.False(t, isErr, text)
	assert.Contains(t, text, "needle-one-4")

	// Unchanged, the session is not read again; changed, it is.
	ctx := context.Background()
	x1, err := src.Index(ctx)
	require.NoError(t, err)
	x2, err := src.Index(ctx)
	require.NoError(t, err)
	assert.Same(t, x1, x2, "serve answered 304")
	appendServeSession(t, ts, "alice-token", "ticket-1", turns("one", 60, 1))
	x3, err := src.Index(ctx)
	require.NoError(t, err)
	assert.NotSame(t, x1, x3)

	// Another conversation of the same token: its markers mean nothing
	// in this one.
	putServeSession(t, ts, "alice-token", "ticket-2", append([]abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Another task."}}}}, turns("two", 0, 30)...))
	for _, other := range abi.MarkersIn(serveSummary(t, ts, "alice-token", "ticket-2")) {
		text, isErr := mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": other})
		assert.True(t, isErr, other)
		assert.NotContains(t, text, "needle-")
	}

	// The same ID under another token is another tenant's: none.
	for _, bad := range []*recallmcp.ServeSource{
		{URL: ts.URL, Session: "ticket-1", Token: "bob-token"},
		{URL: ts.URL, Session: "ticket-1"},
		{URL: ts.URL, Session: "ticket-1", Token: "wrong"},
		{URL: ts.URL, Session: "../ticket-1", Token: "alice-token"},
		{URL: ts.URL, Session: "ticket-1/../ticket-1", Token: "alice-token"},
		{URL: ts.URL, Session: "ticket-1", Token: "alice-token", MaxBytes: 4096},
		{URL: "file:///etc/passwd", Session: "ticket-1", Token: "alice-token"},
	} {
		cs := connect(t, recallmcp.NewServer(bad, "test"))
		for _, tool := range []string{recallmcp.ToolRecall, recallmcp.ToolSearch} {
			text, isErr := mcptest.Call(t, cs, tool, map[string]any{"ref": tools[0], "query": "needle"})
			assert.True(t, isErr, "%+v: %s", bad, text)
			assert.NotContains(t, text, "needle-", "%+v", bad)
			assert.NotContains(t, text, "alice-token", "%+v: the error names no secret", bad)
		}
	}
	_, err = (&recallmcp.ServeSource{URL: ts.URL, Session: "ticket-1", Token: "bob-token"}).Index(ctx)
	assert.ErrorContains(t, err, `no session "ticket-1" for this token`)
	_, err = (&recallmcp.ServeSource{URL: ts.URL, Session: "ticket-1", Token: "alice-token", MaxBytes: 4096}).Index(ctx)
	assert.ErrorContains(t, err, "over the limit of 4096 bytes")

	// Deleting the session deletes its originals with it.
	status, body := serveCall(t, ts, "alice-token", http.MethodDelete, "/v1/sessions/ticket-1", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	putServeSession(t, ts, "alice-token", "ticket-1", opening)
	text, isErr = mcptest.Call(t, connect(t, recallmcp.NewServer(&recallmcp.ServeSource{URL: ts.URL, Session: "ticket-1", Token: "alice-token"}, "test")), recallmcp.ToolSearch, map[string]any{"query": "needle-one"})
	require.False(t, isErr, text)
	assert.Equal(t, "no match", text)
}

// BenchmarkRecallFromServeSession is one recall call's work behind the
// MCP server on a serve session of 400 turns already read: a request to
// serve that it answers 304 (the session unchanged), then the lookup.
func BenchmarkRecallFromServeSession(b *testing.B) {
	ts := startServe(b)
	msgs := append([]abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Read every part."}}}}, turns("b", 0, 400)...)
	putServeSession(b, ts, "alice-token", "bench", msgs)
	src := &recallmcp.ServeSource{URL: ts.URL, Session: "bench", Token: "alice-token"}
	ctx := context.Background()
	x, err := src.Index(ctx)
	if err != nil {
		b.Fatal(err)
	}
	res, err := x.Search(recall.Query{Text: "needle-b-200 found"})
	if err != nil || len(res.Hits) != 1 {
		b.Fatal(err, res)
	}
	ref := res.Hits[0].Ref
	for b.Loop() {
		y, err := src.Index(ctx)
		if err != nil || y != x {
			b.Fatal(err, "the session was read again")
		}
		if _, err := y.Recall(ref, 1); err != nil {
			b.Fatal(err)
		}
	}
}
