package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// claudeCodeCompactPrompt is the text Claude Code's /compact and
// auto-compact send as the last user message (excerpt, Claude Code
// 2.0.76 cli.js).
func claudeCodeCompactPrompt(t testing.TB) string {
	b, err := os.ReadFile("testdata/claude-code-compact-prompt.txt")
	require.NoError(t, err)
	return string(b)
}

// codexCompactPrompt opens the prompt of Codex's compaction turn
// (codex-rs/core/templates/compact/prompt.md).
const codexCompactPrompt = "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM that will resume the task."

// withLastUser appends a user message holding text to an Anthropic body.
func withLastUser(t testing.TB, body []byte, text string) []byte {
	var req map[string]any
	require.NoError(t, json.Unmarshal(body, &req))
	msgs := req["messages"].([]any)
	// The agent's own request follows the assistant's last answer.
	msgs = append(msgs, map[string]any{"role": "assistant", "content": []map[string]any{{"type": "text", "text": "done"}}},
		map[string]any{"role": "user", "content": []map[string]any{{"type": "text", "text": text}}})
	req["messages"] = msgs
	out, err := json.Marshal(req)
	require.NoError(t, err)
	return out
}

// summaryWindow fits 26 scripted turns whole (input budget 14,000 with
// max_tokens 2,000) but compacts them at 75%.
var summaryWindow = host.Config{ContextWindow: 16000, KeepRecentTokens: 1000}

func TestAgentSummaryRequestGoesWhole(t *testing.T) {
	r := newRig(t, func(o *Options) { o.Config = summaryWindow })
	// A turn of the conversation is compacted, and the compaction stored.
	turn := anthropicBody(t, 24, false)
	post(t, r.srv.URL+"/v1/messages", turn, nil)
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	require.NotNil(t, checkFaithful(t, turn, got[0].Body), "the ordinary turn was compacted")

	// Claude Code's /compact: the whole history and its summary prompt.
	compact := withLastUser(t, turn, claudeCodeCompactPrompt(t))
	resp, data := post(t, r.srv.URL+"/v1/messages", compact, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	got = r.up.agentRequests()
	require.Len(t, got, 2)
	assert.Equal(t, string(compact), string(got[1].Body), "the agent's summary request went as sent, no stored compaction spliced in")
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="agent_summary",kind="anthropic"`))
	assert.Contains(t, r.logs.String(), `"agent_summary":"claude-code"`)
}

func TestAgentSummaryRequestTooLargeIsFoldedBySummary(t *testing.T) {
	r := newRig(t, func(o *Options) { o.Config = summaryWindow })
	// 40 turns: past the window itself, where the gate would take the
	// emergency path and drop messages unsummarized.
	compact := withLastUser(t, anthropicBody(t, 40, false), claudeCodeCompactPrompt(t))
	resp, data := post(t, r.srv.URL+"/v1/messages", compact, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	repl := checkFaithful(t, compact, got[0].Body)
	require.NotNil(t, repl, "the request was folded")
	msgs := rawMessages(t, got[0].Body)
	last, _ := userText(msgs[len(msgs)-1])
	assert.Equal(t, claudeCodeCompactPrompt(t), last, "the agent's instruction is kept")
	first, _ := userText(repl[0])
	assert.Contains(t, first, "[Context compacted: the summary below", "folded by a summary")
	assert.NotContains(t, first, "emergency")
	assert.Equal(t, 0.0, metricValue(t, r.srv.URL, `compact_host_proxy_compactions_total{strategy="emergency"`))
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_compactions_total{strategy="structured"`))
	assert.NotEmpty(t, r.up.summaryRequests(), "the strategy asked the model")
}

func TestAgentSummaryRequestCodex(t *testing.T) {
	r := newRig(t, func(o *Options) { o.Config = summaryWindow })
	var req map[string]any
	require.NoError(t, json.Unmarshal(codexBody(t, 14, false, nil), &req))
	items := req["input"].([]any)
	// Codex's compaction turn ends the history with its prompt as the
	// user's message.
	items[len(items)-1] = map[string]any{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": codexCompactPrompt + "\n\nInclude:\n- Goal / user objective\n"}}}
	req["input"] = items
	body, err := json.Marshal(req)
	require.NoError(t, err)
	post(t, r.srv.URL+"/v1/responses", body, nil)
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	assert.Equal(t, string(body), string(got[0].Body))
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="agent_summary",kind="responses"`))
	assert.Contains(t, r.logs.String(), `"agent_summary":"codex"`)
}

func TestAgentSummaryRequestGeneric(t *testing.T) {
	instruction := "Summarize the conversation above in a few paragraphs so that we can continue it in a new session."
	chat := func(t *testing.T, tools bool, toolChoice string) []byte {
		var req map[string]any
		require.NoError(t, json.Unmarshal(openAIBody(t, 26, false), &req))
		msgs := append(req["messages"].([]any), map[string]any{"role": "assistant", "content": "done"},
			map[string]any{"role": "user", "content": instruction})
		req["messages"] = msgs
		if tools {
			req["tools"] = []map[string]any{{"type": "function", "function": map[string]any{"name": "read_file", "parameters": map[string]any{"type": "object"}}}}
		}
		if toolChoice != "" {
			req["tool_choice"] = toolChoice
		}
		body, err := json.Marshal(req)
		require.NoError(t, err)
		return body
	}
	for _, c := range []struct {
		name        string
		tools       bool
		toolChoice  string
		forwardedAs bool
	}{
		{"no tools", false, "", true},
		{"tool_choice none", true, "none", true},
		// With tools on offer the same words are a turn of the task.
		{"tools offered", true, "auto", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, func(o *Options) { o.Config = summaryWindow })
			body := chat(t, c.tools, c.toolChoice)
			post(t, r.srv.URL+"/v1/chat/completions", body, nil)
			got := r.up.agentRequests()
			require.Len(t, got, 1)
			if c.forwardedAs {
				assert.Equal(t, string(body), string(got[0].Body))
			} else {
				assert.NotNil(t, checkFaithful(t, body, got[0].Body), "an ordinary turn is compacted")
			}
		})
	}
}

func TestAgentSummarySigns(t *testing.T) {
	p, err := New(Options{Upstream: mustURL(t, "http://127.0.0.1:1"), Config: smallWindow})
	require.NoError(t, err)
	sign := func(body string) string {
		x := p.newExchange(KindAnthropic, "/v1/messages", http.Header{}, credentials{})
		raw, err := scanRequest([]byte(body))
		require.NoError(t, err)
		x.raw = raw
		return x.agentSummarySign()
	}
	msg := func(role, text string) string {
		b, _ := json.Marshal(map[string]any{"role": role, "content": text})
		return string(b)
	}
	body := func(tools string, msgs ...string) string {
		return fmt.Sprintf(`{"model":"m",%s"messages":[%s]}`, tools, strings.Join(msgs, ","))
	}
	cc := claudeCodeCompactPrompt(t)
	assert.Equal(t, signClaudeCode, sign(body(`"tools":[{"name":"Bash"}],`, msg("user", "hi"), msg("assistant", "ok"), msg("user", cc))))
	assert.Equal(t, signCodex, sign(body("", msg("user", codexCompactPrompt))))
	assert.Equal(t, signGeneric, sign(body("", msg("user", "hi"), msg("assistant", "ok"), msg("user", "Please compact this chat history into a summary."))))
	// Not the last message, not a user message, not an instruction.
	assert.Empty(t, sign(body("", msg("user", cc), msg("assistant", "ok"), msg("user", "go on"))))
	assert.Empty(t, sign(body("", msg("user", "hi"), msg("assistant", cc))))
	assert.Empty(t, sign(body("", msg("user", "Fix the context manager in session.py."))))
	assert.Empty(t, sign(body(`"tools":[{"name":"Bash"}],`, msg("user", "summarize the conversation"))))
}

func mustURL(t testing.TB, s string) *url.URL {
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// TestEmergencyKeepsTheSessionSummary: a session compacted in place
// starts from a summary message; sent through the proxy past its window,
// the emergency path drops the oldest messages but keeps that summary.
func TestEmergencyKeepsTheSessionSummary(t *testing.T) {
	const facts = "Goal: migrate the billing service to Postgres; billing/db.go holds the new schema."
	r := newRig(t, func(o *Options) { o.Config = summaryWindow; o.Offline = true })
	var req map[string]any
	require.NoError(t, json.Unmarshal(anthropicBody(t, 40, false), &req))
	msgs := req["messages"].([]any)
	msgs[0] = map[string]any{"role": "user", "content": []map[string]any{{"type": "text",
		"text": "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n" + facts}}}
	body, err := json.Marshal(req)
	require.NoError(t, err)
	post(t, r.srv.URL+"/v1/messages", body, nil)
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	repl := checkFaithful(t, body, got[0].Body)
	require.NotNil(t, repl)
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_compactions_total{strategy="emergency"`))
	first, _ := userText(repl[0])
	assert.Contains(t, first, facts)
}

// TestResponsesCompactionItemIsKept: the provider's own compaction item
// is never folded: only the provider can read it.
func TestResponsesCompactionItemIsKept(t *testing.T) {
	r := newRig(t, nil)
	var req map[string]any
	require.NoError(t, json.Unmarshal(codexBody(t, 12, false, nil), &req))
	items := req["input"].([]any)
	item := map[string]any{"type": "compaction", "encrypted_content": "gAAAAB-provider-summary"}
	items = append([]any{items[0], item}, items[1:]...)
	req["input"] = items
	body, err := json.Marshal(req)
	require.NoError(t, err)
	post(t, r.srv.URL+"/v1/responses", body, nil)
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	require.NotNil(t, checkFaithfulIn(t, "input", body, got[0].Body), "the request was compacted")
	assert.Contains(t, string(got[0].Body), `{"encrypted_content":"gAAAAB-provider-summary","type":"compaction"}`)
	checkResponsesInput(t, got[0].Body)
}
