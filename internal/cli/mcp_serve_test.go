package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
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
	"github.com/compact-host/compact-host/internal/mcptest"
	"github.com/compact-host/compact-host/internal/server"
)

// serveWithSession runs serve's API on loopback with one token, and keeps
// a session there, compacted: it returns the server, the summary serve
// returned, and the session's ID.
func serveWithSession(t *testing.T, token string) (*httptest.Server, string, string) {
	t.Helper()
	reg, err := plugin.NewRegistry(context.Background(), plugin.Options{
		Wasm: wasm.Runtime, Builtins: wasm.Builtins, PluginsDir: filepath.Join(t.TempDir(), "plugins"),
		CacheDir: filepath.Join(sharedCache(t), "wazero"), NoWatch: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })
	s, err := server.New(server.Options{
		Config: host.Config{ContextWindow: 20000, MaxOutputTokens: 2000, Tokenizer: "chars"}, Registry: reg,
		Version: "test", Logger: slog.New(slog.DiscardHandler), Tokens: []server.Token{{Name: "me", Secret: token}},
	})
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)

	msgs := []abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Read the parts and fix the bug."}}}}
	for i := range 30 {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			abi.Message{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, ID: id, Name: "Bash", Input: []byte(`{"command":"cat part"}`)}}},
			abi.Message{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: id, Text: fmt.Sprintf("part-%d-original\n", i) + strings.Repeat("the original output\n", 150)}}},
		)
	}
	for _, req := range []struct {
		method, path string
		body         any
		status       int
	}{
		{http.MethodPut, "/v1/sessions/ticket-7", map[string]any{"session": msgs}, http.StatusCreated},
		{http.MethodGet, "/v1/sessions/ticket-7", nil, http.StatusOK},
	} {
		data, err := json.Marshal(req.body)
		require.NoError(t, err)
		r, err := http.NewRequest(req.method, ts.URL+req.path, bytes.NewReader(data))
		require.NoError(t, err)
		r.Header.Set("Authorization", "Bearer "+token)
		resp, err := ts.Client().Do(r)
		require.NoError(t, err)
		var view server.SessionView
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&view))
		resp.Body.Close()
		require.Equal(t, req.status, resp.StatusCode)
		if req.method == http.MethodGet {
			require.NotEmpty(t, view.Summary, "serve compacted the session")
			return ts, view.Summary, "ticket-7"
		}
	}
	panic("unreachable")
}

// compact-host mcp --session: the tools answer from the serve session's
// originals, with the token named by --serve-token-env.
func TestMCPRecallsAServeSession(t *testing.T) {
	ts, summary, id := serveWithSession(t, "s3cret-token")
	var ref string
	for _, m := range abi.MarkersIn(summary) {
		if strings.HasPrefix(m, "t-") {
			ref = m
			break
		}
	}
	require.NotEmpty(t, ref, "the summary has a tool-output marker: %s", summary)
	cs := mcpClientEnv(t, map[string]string{"SERVE_TOKEN": "s3cret-token"}, "--session", id, "--serve-url", ts.URL, "--serve-token-env", "SERVE_TOKEN")
	text, isErr := mcptest.Call(t, cs, "recall", map[string]any{"ref": "[recall:" + ref + "]"})
	require.False(t, isErr, text)
	assert.Contains(t, text, "-original\nthe original output")
	text, isErr = mcptest.Call(t, cs, "search", map[string]any{"query": "part-3-original"})
	require.False(t, isErr, text)
	assert.Equal(t, 1, strings.Count(text, "[recall:t-"), text)
}

func TestMCPRefusesAServeSessionItCannotRead(t *testing.T) {
	ts, _, id := serveWithSession(t, "s3cret-token")
	env := map[string]string{"SERVE_TOKEN": "s3cret-token", "WRONG": "nope"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--session", id}, ExitUsage, "--serve-url"},
		{[]string{"--session", id, "--session-file", "x.jsonl", "--serve-url", ts.URL}, ExitUsage, "give the conversation once"},
		{[]string{"--session-file", "x.jsonl", "--serve-url", ts.URL}, ExitUsage, "go with --session"},
		{[]string{"--session", id, "--serve-url", ts.URL, "--serve-token-env", "UNSET"}, ExitUsage, "UNSET: the variable is unset"},
		{[]string{"--session", id, "--serve-url", ts.URL}, ExitInput, "refused the token"},
		{[]string{"--session", id, "--serve-url", ts.URL, "--serve-token-env", "WRONG"}, ExitInput, "refused the token"},
		{[]string{"--session", "other", "--serve-url", ts.URL, "--serve-token-env", "SERVE_TOKEN"}, ExitInput, `no session "other" for this token`},
		{[]string{"--session", "../" + id, "--serve-url", ts.URL, "--serve-token-env", "SERVE_TOKEN"}, ExitInput, "answered 400"},
		{[]string{"--session", id, "--serve-url", closed, "--serve-token-env", "SERVE_TOKEN"}, ExitInput, "cannot be reached"},
		{[]string{"--session", id, "--serve-url", "ftp://" + ln.Addr().String(), "--serve-token-env", "SERVE_TOKEN"}, ExitInput, "not an http or https URL"},
	} {
		r := runCLI(t, runOpts{env: env}, append([]string{"mcp"}, tc.args...)...)
		assert.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.says, "%v", tc.args)
		assert.NotContains(t, r.stderr, "s3cret-token", "%v", tc.args)
	}
}
