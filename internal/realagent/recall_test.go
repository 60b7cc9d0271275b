package realagent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recallServer is the name the agents' configuration gives compact-host's
// MCP server; the agents name its tools after it.
const recallServer = "compact-host"

const (
	recallPrompt = "realagent recall check: read back the largest folded tool output."
	recallReply  = "RECALLED-5e2b"
)

// toolMarker finds a tool output's marker in a request.
var toolMarker = regexp.MustCompile(`\[recall:(t-[0-9a-f]+)\]`)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// compactHostBinary builds the compact-host command once for the test
// binary: the agents start it as their MCP server.
func compactHostBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "realagent-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "compact-host")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", binPath, "github.com/compact-host/compact-host/cmd/compact-host").CombinedOutput()
		if err != nil {
			binErr = err
			binPath = string(out)
		}
	})
	require.NoError(t, binErr, "go build ./cmd/compact-host: %s", binPath)
	return binPath
}

// compactedCopy copies a corpus file to a temporary directory and
// compacts it in place there.
func compactedCopy(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(corpusPath(t, name))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	compactInPlace(t, path)
	return path
}

// recalledText is the original text of a recall tool answer: what follows
// its first line, "[recall:REF] page N of M, B bytes in all".
func recalledText(t *testing.T, answer, ref string) string {
	t.Helper()
	head, text, ok := strings.Cut(answer, "\n")
	require.True(t, ok, "a recall answer: %.300s", answer)
	require.True(t, strings.HasPrefix(head, "[recall:"+ref+"] page 1 of "), "the answer names the marker asked for: %q", head)
	return text
}

// toolOutputMarker heads a tool output in a recall answer.
var toolOutputMarker = regexp.MustCompile(`(?m)^\[tool output ([^\]\s]+)\]\n`)

// checkRecalled asserts that text, a recall answer's first page, holds a
// tool output of the original file word for word: the text after its
// "[tool output ID]" line begins the output the file holds for that call.
func checkRecalled(t *testing.T, original string, text string) {
	t.Helper()
	id, got := recalledOutput(t, text)
	want, ok := originalOutput(t, original, id)
	require.True(t, ok, "the original file has no output of tool call %s", id)
	require.NotEmpty(t, got)
	assert.GreaterOrEqual(t, len(got), min(len(want), 1024), "a marked tool output is 1 KB or more")
	assert.True(t, strings.HasPrefix(want, got), "the recalled output of %s is not the original's (%d bytes recalled, %d original): %.200q", id, len(got), len(want), got)
	t.Logf("recalled the output of %s: %d of its %d bytes on page 1", id, len(got), len(want))
}

// recalledOutput is the tool output in text, a recall answer's first
// page: the call's ID from its "[tool output ID]" line, and the output
// that follows, without the server's note of the next page or the
// reminders Claude Code may add after the tool's text.
func recalledOutput(t *testing.T, text string) (id, output string) {
	t.Helper()
	loc := toolOutputMarker.FindStringSubmatchIndex(text)
	require.NotNil(t, loc, "no [tool output ID] line in the recalled text: %.300s", text)
	id, output = text[loc[2]:loc[3]], text[loc[1]:]
	if i := strings.Index(output, "\n[page 1 of "); i >= 0 {
		output = output[:i]
	} else if i := strings.Index(output, "\n<system-reminder>"); i >= 0 {
		output = output[:i]
	}
	return id, strings.TrimSuffix(output, "\n")
}

// recallOnce scripts the upstream of a recall test: the first call that
// offers tool and carries a [recall:t-…] marker is answered with a call of
// tool on that marker (call ID id, the marker in *ref), every other call
// with recallReply.
func recallOnce(tool, id string, ref *string) func(int, []byte) []block {
	return func(_ int, body []byte) []block {
		if *ref == "" {
			if m := toolMarker.FindSubmatch(body); m != nil && strings.Contains(string(body), `"name":"`+tool+`"`) {
				*ref = string(m[1])
				input, _ := json.Marshal(map[string]string{"ref": *ref})
				return []block{{Type: "tool_use", ID: id, Name: tool, Input: input}}
			}
		}
		return []block{{Type: "text", Text: recallReply}}
	}
}

// recallAnswer is the text of the result of tool call id that a request
// of calls carries, "" when none does; a failed call fails the test.
func recallAnswer(t *testing.T, calls [][]byte, id string) string {
	t.Helper()
	answer := ""
	for _, c := range calls {
		for _, b := range toolResults(t, c) {
			if b.ToolUseID == id {
				require.False(t, b.IsError, "the recall tool failed: %s", b.Content)
				answer = blockText(t, b.Content)
			}
		}
	}
	return answer
}

// originalOutput is the output a session file holds for a tool call: a
// Claude Code tool_result's text or a Codex function_call_output's.
func originalOutput(t *testing.T, path, id string) (string, bool) {
	t.Helper()
	for _, r := range records(t, path) {
		if p := obj(r["payload"]); str(r["type"]) == "response_item" && str(p["call_id"]) == id && strings.HasSuffix(str(p["type"]), "_output") {
			if s, ok := p["output"].(string); ok {
				return s, true
			}
			raw, _ := json.Marshal(p["output"])
			return blockText(t, raw), true
		}
		for _, b := range list(obj(r["message"])["content"]) {
			if str(obj(b)["type"]) == "tool_result" && str(obj(b)["tool_use_id"]) == id {
				raw, _ := json.Marshal(obj(b)["content"])
				return blockText(t, raw), true
			}
		}
	}
	return "", false
}

// TestClaudeCodeRecallsThroughMCP resumes a Claude Code session compacted
// in place with compact-host mcp as an MCP server (README's mcp.json): the
// upstream calls recall on a tool output's marker of the summary, and the
// agent's next request carries that output as the file held it.
func TestClaudeCodeRecallsThroughMCP(t *testing.T) {
	bin := agentBin(t, ClaudeCode)
	exe := compactHostBinary(t)
	path := compactedCopy(t, "claude-code-go-cli.jsonl")
	id := ""
	for _, r := range records(t, path) {
		if id = str(r["sessionId"]); id != "" {
			break
		}
	}
	require.Regexp(t, uuidPattern, id)

	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	// The server reads the file the agent resumes and appends to.
	agentFile := filepath.Join(dir, "home", ".claude", "projects", projectSlug(filepath.Join(dir, "work")), id+".jsonl")
	config, err := json.Marshal(map[string]any{"mcpServers": map[string]any{recallServer: map[string]any{
		"command": exe, "args": []string{"mcp", "--session-file", agentFile}}}})
	require.NoError(t, err)
	configFile := filepath.Join(dir, "mcp.json")
	require.NoError(t, os.WriteFile(configFile, config, 0o600))

	tool := "mcp__" + recallServer + "__recall"
	var ref string
	up := newScriptedAnthropic(t, recallOnce(tool, "toolu_realagentrecall01", &ref))
	run, err := Resume(context.Background(), ClaudeCode, Options{Bin: bin, Session: path, Prompt: recallPrompt, Dir: dir, BaseURL: up.srv.URL,
		// --mcp-config and --allowedTools take lists: the switch after
		// them ends each, so the prompt stays a prompt.
		Args: []string{"--allowedTools", tool, "--mcp-config", configFile, "--strict-mcp-config"},
		// With tool search on, Claude Code defers MCP tools behind its
		// ToolSearch tool; off, the request lists them.
		Env: []string{"ENABLE_TOOL_SEARCH=false"}})
	require.NoError(t, err)
	logOtherRequests(t, run)
	calls, _ := up.calls()
	require.NotEmpty(t, calls)
	require.NotEmpty(t, ref, "no request offered %s with a [recall:t-…] marker; tools of the first: %v; markers %q", tool, toolNames(t, calls[0]), toolMarker.FindAllString(string(calls[0]), 3))
	assert.Contains(t, string(run.Stdout), recallReply)

	// The request after the tool call carries the recall tool's answer.
	answer := recallAnswer(t, calls, "toolu_realagentrecall01")
	require.NotEmpty(t, answer, "no request carried the recall tool's result")
	text := recalledText(t, answer, ref)
	require.NotEmpty(t, text)
	checkRecalled(t, corpusPath(t, "claude-code-go-cli.jsonl"), text)
	t.Logf("recalled [recall:%s]: %d bytes over %d model calls", ref, len(text), len(calls))
}

// blockText is the text of a tool result's content: a string or text blocks.
func blockText(t *testing.T, content json.RawMessage) string {
	t.Helper()
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(content, &blocks), "%.300s", content)
	var b strings.Builder
	for _, x := range blocks {
		b.WriteString(x.Text)
	}
	return b.String()
}

// toolNames are the names of a request's tools.
func toolNames(t *testing.T, body []byte) []string {
	t.Helper()
	var req struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	var out []string
	for _, x := range req.Tools {
		out = append(out, x.Name)
	}
	return out
}

// recallResponses is a loopback Responses API for the Codex run. Codex
// offers MCP tools only through its tool_search tool, so the first call
// that offers it is answered with a tool_search_call; the next one, which
// carries the search's output (a namespace holding recall), with a
// function_call of recall on a tool output's marker of the input; every
// other call with recallReply. A proxy's summary calls (proxySummaryModel)
// get proxySummary. It records every model call's body and credential.
type recallResponses struct {
	srv       *httptest.Server
	namespace string

	mu        sync.Mutex
	calls     [][]byte
	auth      []string // each model call's Authorization header
	summaries int
	ref       string
	searched  bool
}

// recallCallID is the call_id of the scripted recall call.
const recallCallID = "call_realagentrecall01"

func newRecallResponses(t *testing.T, namespace string) *recallResponses {
	u := &recallResponses{namespace: namespace}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *recallResponses) recorded() ([][]byte, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.calls...), u.ref
}

func (u *recallResponses) serve(w http.ResponseWriter, r *http.Request) {
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.Error(w, `{"error":{"message":"WebSockets are not served here","type":"invalid_request_error"}}`, http.StatusUpgradeRequired)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil || r.Method != http.MethodPost || strings.TrimSuffix(r.URL.Path, "/") != "/v1/responses" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model string `json:"model"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	offered := false
	for _, x := range req.Tools {
		offered = offered || x.Name == u.namespace
	}
	u.mu.Lock()
	reply := recallReply
	if req.Model == proxySummaryModel {
		u.summaries++
		reply = proxySummary
	} else {
		u.calls = append(u.calls, body)
		u.auth = append(u.auth, r.Header.Get("Authorization"))
	}
	n := len(u.calls) + u.summaries
	item := fmt.Sprintf(`{"id":"msg_recall%03d","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":%q}]}`, n, reply)
	if req.Model == proxySummaryModel {
		// A summary call is answered with the summary alone.
	} else if !offered && !u.searched && strings.Contains(string(body), `"type":"tool_search"`) {
		// Codex defers MCP tools behind its client-side tool_search: the
		// model searches first, and the next call offers what it found.
		u.searched = true
		item = fmt.Sprintf(`{"id":"ts_recall%03d","type":"tool_search_call","status":"completed","execution":"client","call_id":"call_recallsearch","arguments":{"query":"recall folded tool output","limit":8}}`, n)
	} else if m := toolMarker.FindSubmatch(body); u.ref == "" && m != nil && (offered || u.searched) {
		u.ref = string(m[1])
		args, _ := json.Marshal(map[string]string{"ref": u.ref})
		// A deferred tool is called by its name within the namespace the
		// search returned.
		item = fmt.Sprintf(`{"id":"fc_recall%03d","type":"function_call","status":"completed","namespace":%q,"name":"recall","call_id":%q,"arguments":%q}`, n, u.namespace, recallCallID, args)
	}
	u.mu.Unlock()
	id := fmt.Sprintf("resp_recall%03d", n)
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range []string{
		fmt.Sprintf(`{"type":"response.created","sequence_number":0,"response":{"id":%q,"object":"response","status":"in_progress","model":%q,"output":[]}}`, id, req.Model),
		fmt.Sprintf(`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":%s}`, item),
		fmt.Sprintf(`{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":%s}`, item),
		fmt.Sprintf(`{"type":"response.completed","sequence_number":3,"response":{"id":%q,"object":"response","status":"completed","model":%q,"output":[%s],"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}}`,
			id, req.Model, item, len(body)/4, len(body)/4+20),
	} {
		writeSSE(w, ev)
	}
}

// codexRolloutPath is where Resume places a Codex rollout under dir.
func codexRolloutPath(t *testing.T, dir, path string) string {
	t.Helper()
	for _, r := range records(t, path) {
		if str(r["type"]) != "session_meta" {
			continue
		}
		p := obj(r["payload"])
		at, err := time.Parse(time.RFC3339Nano, str(p["timestamp"]))
		require.NoError(t, err)
		at = at.UTC()
		return filepath.Join(dir, "home", ".codex", "sessions", at.Format("2006"), at.Format("01"), at.Format("02"),
			"rollout-"+at.Format("2006-01-02T15-04-05")+"-"+str(p["id"])+".jsonl")
	}
	t.Fatalf("%s has no session_meta record", path)
	return ""
}

// TestCodexRecallsThroughMCP does the same with Codex and README's
// [mcp_servers.compact-host] table: the tool is found through Codex's
// tool_search, and the next request's function_call_output carries the
// output as the rollout held it.
func TestCodexRecallsThroughMCP(t *testing.T) {
	bin := agentBin(t, Codex)
	exe := compactHostBinary(t)
	path := compactedCopy(t, "codex-typescript.jsonl")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	agentFile := codexRolloutPath(t, dir, path)

	// Codex names the server's tools' namespace mcp__<server>, '-' as '_'.
	tool := "mcp__" + strings.ReplaceAll(recallServer, "-", "_")
	up := newRecallResponses(t, tool)
	config := "[mcp_servers." + recallServer + "]\ncommand = " + tomlString(exe) + "\nargs = [\"mcp\", \"--session-file\", " + tomlString(agentFile) + "]\n"
	run, err := Resume(context.Background(), Codex, Options{Bin: bin, Session: path, Prompt: recallPrompt, Dir: dir, BaseURL: up.srv.URL, CodexConfig: config})
	require.NoError(t, err)
	logOtherRequests(t, run)
	calls, ref := up.recorded()
	require.NotEmpty(t, calls)
	require.NotEmpty(t, ref, "no request offered the %s tools with a [recall:t-…] marker; tools of the first: %v; markers %q", tool, toolNames(t, calls[0]), toolMarker.FindAllString(string(calls[0]), 3))
	assert.Contains(t, string(run.Stdout), recallReply)

	text := codexRecalled(t, calls, ref)
	checkRecalled(t, corpusPath(t, "codex-typescript.jsonl"), text)
	t.Logf("recalled [recall:%s]: %d bytes over %d model calls", ref, len(text), len(calls))
}

// codexRecalled is the recalled text of the recall call's
// function_call_output that a Codex request of calls carries; the call
// must have come from Codex's tool search.
func codexRecalled(t *testing.T, calls [][]byte, ref string) string {
	t.Helper()
	var answer string
	for _, c := range calls {
		var req struct {
			Input []struct {
				Type   string          `json:"type"`
				CallID string          `json:"call_id"`
				Output json.RawMessage `json:"output"`
			} `json:"input"`
		}
		require.NoError(t, json.Unmarshal(c, &req))
		for _, it := range req.Input {
			if it.Type == "function_call_output" && it.CallID == recallCallID {
				answer = blockText(t, it.Output)
			}
		}
	}
	require.NotEmpty(t, answer, "no request carried the recall tool's function_call_output")
	assert.Contains(t, string(calls[len(calls)-1]), `"type":"tool_search_output"`, "the recall tool came from Codex's tool search")
	// Codex puts its own block first: "Wall time: … seconds\nOutput:".
	i := strings.Index(answer, "[recall:"+ref+"]")
	require.GreaterOrEqual(t, i, 0, "the output does not name the marker asked for: %.300s", answer)
	return recalledText(t, answer[i:], ref)
}
