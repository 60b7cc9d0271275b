package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With no compaction model configured, a Gemini conversation's summaries
// go to the catalog's cheaper Gemini model, which the catalog files under
// Google, not to the agent's own model.
func TestGeminiSummariesGoToTheCheaperModel(t *testing.T) {
	r, up := newGeminiRig(t, func(o *Options) { o.CompactionModel = "" })
	const turns = 14
	var history []string
	for i := range turns {
		history = append(history, geminiTurn(i)...)
		req, err := http.NewRequest(http.MethodPost, r.srv.URL+"/v1beta/models/"+geminiAgentModel+":generateContent", bytes.NewReader(geminiBody(history)))
		require.NoError(t, err)
		req.Header.Set("X-Goog-Api-Key", geminiTestKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", answer)
		history = append(history, geminiReplyContent(t, answer))
	}
	// The upstream tells summary calls by its own test model; here every
	// call is filed with the agent's, and told apart by its path.
	calls, _ := up.records()
	byModel := map[string]int{}
	for _, c := range calls {
		model, _ := geminiModelOf(c.Path)
		byModel[model]++
	}
	assert.Equal(t, turns, byModel[geminiAgentModel], "the agent's own calls, and no summary, go to %s: %v", geminiAgentModel, byModel)
	assert.Positive(t, byModel["gemini-2.5-flash-lite"], "no summary went to gemini-2.5-flash-lite: %v", byModel)
	assert.Len(t, byModel, 2, "%v", byModel)
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, "compact_host_proxy_compactions_total"))
}

// An agent's own summary request never reuses an emergency compaction: a
// turn past the window was cut by the emergency path, and the /compact
// that follows it is folded by a summary, so the agent's summary is
// written from the whole history, not from the few messages the
// emergency path kept.
func TestAgentSummaryRequestSkipsAnEmergencyCompaction(t *testing.T) {
	r := newRig(t, func(o *Options) { o.Config = summaryWindow })
	turn := anthropicBody(t, 40, false)
	post(t, r.srv.URL+"/v1/messages", turn, nil)
	require.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_compactions_total{strategy="emergency"`),
		"the turn past the window was cut by the emergency path")
	require.Empty(t, r.up.summaryRequests())

	compact := withLastUser(t, turn, claudeCodeCompactPrompt(t))
	resp, data := post(t, r.srv.URL+"/v1/messages", compact, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	got := r.up.agentRequests()
	require.Len(t, got, 2)
	repl := checkFaithful(t, compact, got[1].Body)
	require.NotNil(t, repl, "the summary request past the window was folded")
	first, _ := userText(repl[0])
	assert.Contains(t, first, "[Context compacted: the summary below", "folded by a summary")
	assert.NotContains(t, first, "emergency")
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_compactions_total{strategy="structured"`))
	assert.NotEmpty(t, r.up.summaryRequests(), "the strategy asked the model")
	msgs := rawMessages(t, got[1].Body)
	last, _ := userText(msgs[len(msgs)-1])
	assert.Equal(t, claudeCodeCompactPrompt(t), last, "the agent's instruction is kept")
}

// Claude Code with its default model ends its /compact request with a
// system message (the date) after the instruction, and has system
// messages inside "messages": the request is still the agent's own
// summary request, and goes whole.
func TestAgentSummaryRequestBeforeSystemMessages(t *testing.T) {
	r := newRig(t, func(o *Options) { o.Config = summaryWindow })
	var req map[string]any
	require.NoError(t, json.Unmarshal(withLastUser(t, anthropicBody(t, 24, false), claudeCodeCompactPrompt(t)), &req))
	msgs := req["messages"].([]any)
	msgs = append([]any{msgs[0], map[string]any{"role": "system", "content": []any{}}}, msgs[1:]...)
	req["messages"] = append(msgs, map[string]any{"role": "system", "content": "Today's date is 2026-11-28."})
	req["model"] = "claude-opus-5-5"
	compact, err := json.Marshal(req)
	require.NoError(t, err)
	resp, data := post(t, r.srv.URL+"/v1/messages", compact, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	assert.Equal(t, string(compact), string(got[0].Body), "the agent's summary request went as sent")
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="agent_summary",kind="anthropic"`))

	// An ordinary turn of such a conversation is compacted, its system
	// messages kept where they were.
	turn := []any{}
	require.NoError(t, json.Unmarshal(compact, &req))
	for _, m := range req["messages"].([]any)[:len(req["messages"].([]any))-3] {
		turn = append(turn, m)
	}
	req["messages"] = append(turn, map[string]any{"role": "system", "content": "Today's date is 2026-11-28."})
	body, err := json.Marshal(req)
	require.NoError(t, err)
	post(t, r.srv.URL+"/v1/messages", body, nil)
	got = r.up.agentRequests()
	require.Len(t, got, 2)
	repl := checkFaithful(t, body, got[1].Body)
	require.NotNil(t, repl, "the turn was compacted, not refused as another API's request")
	assert.Equal(t, `{"content":[],"role":"system"}`, string(repl[0]), "the folded system message is kept, before the summary")
	first, _ := userText(repl[1])
	assert.Contains(t, first, "[Context compacted: the summary below")
	sent := rawMessages(t, got[1].Body)
	assert.Equal(t, `{"content":"Today's date is 2026-11-28.","role":"system"}`, string(sent[len(sent)-1]))
}
