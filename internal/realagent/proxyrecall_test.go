package realagent

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/recall"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/proxy"
)

// claudeCodeKey is the API key the harness gives Claude Code: the proxy's
// tenant for its model calls, and the credential its MCP config sends.
const claudeCodeKey = "sk-ant-realagent-dummy"

// TestClaudeCodeRecallsThroughTheProxy resumes a corpus session of Claude
// Code through the proxy at a window its history crosses, with the
// proxy's own MCP endpoint in Claude Code's --mcp-config (README's
// example: type http, the agent's key as x-api-key). The proxy folds the
// history, keeps the originals in its disk store and hints the tools in
// the summary; the upstream calls recall on a tool output's marker of that
// summary; Claude Code calls the proxy's MCP server, and its next request
// carries the original output as Claude Code itself had sent it.
func TestClaudeCodeRecallsThroughTheProxy(t *testing.T) {
	bin := agentBin(t, ClaudeCode)
	disk, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
	require.NoError(t, err)

	tool := "mcp__" + recallServer + "__recall"
	var ref string
	up := newScriptedAnthropic(t, recallOnce(tool, "toolu_realagentrecall02", &ref))
	// The resumed history is about 75k tokens; with the agent's 22k of
	// system prompt and tools, a 125k window puts the first request past
	// the compaction point and under the emergency share, so a strategy
	// writes the summary.
	rig := startProxy(t, up.srv.URL, host.Config{ContextWindow: 125_000, MaxOutputTokens: 8_000, KeepRecentTokens: 3_000, RecallHint: true},
		func(o *proxy.Options) { o.Store, o.MCP = disk, true })

	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	config, err := json.Marshal(map[string]any{"mcpServers": map[string]any{recallServer: map[string]any{
		"type": "http", "url": rig.url + proxy.MCPPath, "headers": map[string]string{"x-api-key": claudeCodeKey}}}})
	require.NoError(t, err)
	configFile := filepath.Join(dir, "mcp.json")
	require.NoError(t, os.WriteFile(configFile, config, 0o600))

	run, err := Resume(context.Background(), ClaudeCode, Options{Bin: bin, Session: corpusPath(t, "claude-code-go-cli.jsonl"), Prompt: recallPrompt,
		Model: "claude-sonnet-4-5", Dir: dir, BaseURL: rig.url, Timeout: 3 * time.Minute,
		Args: []string{"--allowedTools", tool, "--mcp-config", configFile, "--strict-mcp-config"},
		Env:  []string{"ENABLE_TOOL_SEARCH=false"}})
	require.NoError(t, err)
	logOtherRequests(t, run)
	calls, _ := up.calls()
	require.NotEmpty(t, calls)
	require.NotEmpty(t, ref, "no request offered %s with a [recall:t-…] marker; tools of the first: %v", tool, toolNames(t, calls[0]))
	assert.Contains(t, string(run.Stdout), recallReply)
	assert.Contains(t, string(calls[0]), mustJSON(t, recall.Hint), "the proxy's summary names the tools")
	assert.Positive(t, rig.metric(t, "compact_host_proxy_compactions_total"))
	assert.Zero(t, rig.metric(t, `compact_host_proxy_compactions_total{strategy="emergency"`), "folded by the strategy's summary: %s", gateLines(rig))

	// The call after the tool call carries the recall tool's answer.
	answer := recallAnswer(t, calls, "toolu_realagentrecall02")
	require.NotEmpty(t, answer, "no request carried the recall tool's result")
	id, got := recalledOutput(t, recalledText(t, answer, ref))
	// The original: that output in the first request Claude Code sent.
	want := ""
	for _, b := range toolResults(t, rig.sentCalls()[0]) {
		if b.ToolUseID == id {
			want = blockText(t, b.Content)
		}
	}
	require.NotEmpty(t, want, "Claude Code's first request has no output of %s", id)
	assert.GreaterOrEqual(t, len(got), min(len(want), 1024), "a marked tool output is 1 KB or more")
	assert.True(t, strings.HasPrefix(want, got), "the recalled output of %s is not what Claude Code sent (%d bytes recalled, %d sent): %.200q", id, len(got), len(want), got)
	t.Logf("recalled [recall:%s], the output of %s: %d of its %d bytes on page 1, over %d model calls", ref, id, len(got), len(want), len(calls))
}

// codexKey is the API key Resume gives Codex (OPENAI_API_KEY).
const codexKey = "sk-realagent-dummy"

// codexRecallWindow is the proxy's window in the Codex run.
const codexRecallWindow = 125_000

// TestCodexRecallsThroughTheProxy does the same with the pinned Codex:
// the corpus rollout resumed through the proxy, Codex signed in with its
// API key (codex login --with-api-key, so its model calls carry the key as
// a bearer token, as a user's Codex does) and the proxy's MCP endpoint in
// config.toml with that key as its bearer token. The upstream finds the
// recall tool through Codex's tool_search and calls it on a marker of the
// proxy's summary; Codex's next request carries the original output.
func TestCodexRecallsThroughTheProxy(t *testing.T) {
	bin := agentBin(t, Codex)
	disk, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
	require.NoError(t, err)

	// Codex names the server's tools' namespace mcp__<server>, '-' as '_'.
	up := newRecallResponses(t, "mcp__"+strings.ReplaceAll(recallServer, "-", "_"))
	rig := startProxy(t, up.srv.URL, host.Config{ContextWindow: codexRecallWindow, MaxOutputTokens: 8_000, KeepRecentTokens: 3_000, RecallHint: true},
		func(o *proxy.Options) { o.Store, o.MCP = disk, true })

	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	// Resume keeps Codex's home at dir/home/.codex; signing in first puts
	// auth.json there, which config.toml leaves alone.
	codexHome := filepath.Join(dir, "home", ".codex")
	require.NoError(t, os.MkdirAll(codexHome, 0o700))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	login := exec.CommandContext(ctx, bin, "login", "--with-api-key")
	login.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"), "CODEX_HOME=" + codexHome}
	login.Stdin = strings.NewReader(codexKey + "\n")
	out, err := login.CombinedOutput()
	require.NoError(t, err, "codex login --with-api-key: %s", out)

	config := "[mcp_servers." + recallServer + "]\nurl = " + tomlString(rig.url+proxy.MCPPath) + "\nbearer_token_env_var = \"OPENAI_API_KEY\"\n"
	run, err := Resume(context.Background(), Codex, Options{Bin: bin, Session: corpusPath(t, "codex-typescript.jsonl"), Prompt: recallPrompt,
		Dir: dir, BaseURL: rig.url, Timeout: 3 * time.Minute, CodexConfig: config})
	require.NoError(t, err)
	logOtherRequests(t, run)
	calls, ref := up.recorded()
	require.NotEmpty(t, calls)
	up.mu.Lock()
	auth := append([]string(nil), up.auth...)
	up.mu.Unlock()
	for i, a := range auth {
		assert.Equal(t, "Bearer "+codexKey, a, "model call %d carried the signed-in key", i+1)
	}
	require.NotEmpty(t, ref, "no request offered the recall tools with a [recall:t-…] marker; tools of the first: %v; markers %q; gate: %s",
		toolNames(t, calls[0]), toolMarker.FindAllString(string(calls[0]), 3), gateLines(rig))
	assert.Contains(t, string(run.Stdout), recallReply)
	assert.Contains(t, string(calls[0]), mustJSON(t, recall.Hint), "the proxy's summary names the tools")
	assert.Positive(t, rig.metric(t, "compact_host_proxy_compactions_total"))
	assert.Zero(t, rig.metric(t, `compact_host_proxy_compactions_total{strategy="emergency"`), "folded by the strategy's summary: %s", gateLines(rig))

	text := codexRecalled(t, calls, ref)
	checkRecalled(t, corpusPath(t, "codex-typescript.jsonl"), text)
	t.Logf("recalled [recall:%s]: %d bytes over %d model calls", ref, len(text), len(calls))
}

// toolResult is a tool_result block of a Messages request.
type toolResult struct {
	Type      string          `json:"type"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

// toolResults are the tool_result blocks of a Messages request.
func toolResults(t *testing.T, body []byte) []toolResult {
	t.Helper()
	var out []toolResult
	for _, m := range messagesOf(t, body) {
		var msg struct {
			Content json.RawMessage `json:"content"`
		}
		require.NoError(t, json.Unmarshal(m, &msg))
		var blocks []toolResult
		if json.Unmarshal(msg.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				out = append(out, b)
			}
		}
	}
	return out
}

// mustJSON is s as it reads inside a JSON string.
func mustJSON(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return strings.Trim(string(b), `"`)
}

// gateLines are the proxy's log lines of its gate decisions.
func gateLines(rig *proxyRig) string {
	var out []string
	for _, l := range strings.Split(rig.logs.String(), "\n") {
		if strings.Contains(l, `"msg":"gate"`) || strings.Contains(l, `"msg":"compacted"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
