package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// codexTurn is one turn of a Codex-shaped conversation: the user's
// request, an encrypted reasoning item, a shell call, its output and the
// answer.
func codexTurn(i int) []json.RawMessage {
	raw := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return b
	}
	call := fmt.Sprintf("call_%d", i)
	return []json.RawMessage{
		raw(map[string]any{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": turnText(i)}}}),
		raw(map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", i), "summary": []any{}, "encrypted_content": "gAAAAB" + strings.Repeat("x", 40)}),
		raw(map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", i), "name": "shell", "call_id": call,
			"arguments": fmt.Sprintf(`{"command":["go","test","./parser_%d"]}`, i)}),
		raw(map[string]any{"type": "function_call_output", "call_id": call, "output": "FAIL " + turnText(i)}),
		raw(map[string]any{"type": "message", "role": "assistant", "id": fmt.Sprintf("msg_%d", i),
			"content": []map[string]any{{"type": "output_text", "text": fmt.Sprintf("reply %d", i+1), "annotations": []any{}}}}),
	}
}

// codexBody is the request Codex sends in turn n: the turns before it
// whole and the user's new request.
func codexBody(t testing.TB, n int, stream bool, extra map[string]any) []byte {
	items := []json.RawMessage{json.RawMessage(`{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>workspace-write</permissions instructions>"}]}`)}
	for i := range n {
		turn := codexTurn(i)
		if i == n-1 {
			turn = turn[:1]
		}
		items = append(items, turn...)
	}
	req := map[string]any{"model": "gpt-5-codex", "instructions": "You are Codex, a coding agent.", "input": items,
		"tools":       []map[string]any{{"type": "function", "name": "shell", "parameters": map[string]any{"type": "object"}}},
		"tool_choice": "auto", "parallel_tool_calls": false, "reasoning": map[string]any{"effort": "medium", "summary": "auto"},
		"store": false, "stream": stream, "include": []string{"reasoning.encrypted_content"}, "prompt_cache_key": "019f36b8-7808"}
	for k, v := range extra {
		req[k] = v
	}
	body, err := json.Marshal(req)
	require.NoError(t, err)
	return body
}

// checkResponsesInput checks a rewritten Responses request against the
// API's rules: every call meets its output, and every reasoning item is
// followed by the output item it belongs to.
func checkResponsesInput(t *testing.T, body []byte) {
	t.Helper()
	checkValid(t, formats.Responses, body)
	items := rawArray(t, "input", body)
	for i, it := range items {
		var head struct{ Type, Role string }
		require.NoError(t, json.Unmarshal(it, &head))
		if head.Type != "reasoning" {
			continue
		}
		require.Less(t, i+1, len(items), "a reasoning item ends the input")
		var next struct{ Type, Role string }
		require.NoError(t, json.Unmarshal(items[i+1], &next))
		assert.True(t, next.Type == "function_call" || next.Type == "reasoning" || (next.Type == "message" && next.Role == "assistant"),
			"input[%d] is a reasoning item followed by %s %s", i, next.Type, next.Role)
	}
}

func TestResponsesConversationIsCompacted(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			r := newRig(t, nil)
			const turns = 12
			for n := 1; n <= turns; n++ {
				resp, data := post(t, r.srv.URL+"/v1/responses", codexBody(t, n, stream, nil), map[string]string{"Authorization": "Bearer " + testKey})
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
				if stream {
					assert.Contains(t, string(data), "event: response.completed")
				}
				assert.Contains(t, string(data), fmt.Sprintf("reply %d", n))
			}
			sent, got := r.front.requests(), r.up.agentRequests()
			require.Len(t, got, turns)
			var first []json.RawMessage
			compactedAt := 0
			for n := range got {
				repl := checkFaithfulIn(t, "input", sent[n].Body, got[n].Body)
				if repl == nil {
					require.Nil(t, first, "request %d went uncompacted after a compaction", n+1)
					continue
				}
				checkResponsesInput(t, got[n].Body)
				if first == nil {
					first, compactedAt = repl, n
					continue
				}
				if metricValue(t, r.srv.URL, "compact_host_proxy_compactions_total") == 1 {
					require.Len(t, repl, len(first))
					assert.Equal(t, string(first[0]), string(repl[0]), "request %d carries another summary", n+1)
				}
			}
			require.NotNil(t, first, "no request was compacted")
			t.Logf("compacted first at request %d of %d", compactedAt+1, turns)
			var summary struct{ Type, Role string }
			require.NoError(t, json.Unmarshal(first[len(first)-1], &summary))
			assert.Equal(t, "message", summary.Type)
			assert.Equal(t, "user", summary.Role)
			assert.GreaterOrEqual(t, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="compacted",kind="responses"`), 1.0)
			// The summary was asked of the same upstream with the client's key.
			calls := r.up.summaryRequests()
			require.NotEmpty(t, calls)
			assert.Equal(t, "/v1/responses", calls[0].Path, "a Responses conversation is summarized through the Responses API")
			assert.Equal(t, "Bearer "+testKey, calls[0].Header.Get("Authorization"))
			assert.NotContains(t, r.logs.String(), testKey, "a log line holds the key")
		})
	}
}

// TestResponsesSDK drives the proxy with the official OpenAI Go SDK's
// Responses client, streamed and not, over a conversation long enough to
// be compacted.
func TestResponsesSDK(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()
	r := newRig(t, nil)
	client := openai.NewClient(ooption.WithBaseURL(r.srv.URL+"/v1/"), ooption.WithAPIKey(testKey), ooption.WithMaxRetries(0))
	var input responses.ResponseInputParam
	for i := range 12 {
		input = append(input, responses.ResponseInputItemParamOfMessage(turnText(i), responses.EasyInputMessageRoleUser))
		params := responses.ResponseNewParams{Model: "gpt-5-codex", Instructions: openai.String("You are a careful coding agent."),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
		var text string
		if i%2 == 0 {
			resp, err := client.Responses.New(ctx, params)
			require.NoError(t, err)
			text = resp.OutputText()
		} else {
			stream := client.Responses.NewStreaming(ctx, params)
			for stream.Next() {
				if ev := stream.Current(); ev.Type == "response.output_text.delta" {
					text += ev.Delta.OfString
				}
			}
			require.NoError(t, stream.Err())
		}
		assert.Equal(t, fmt.Sprintf("reply %d", i+1), text)
		input = append(input, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleAssistant))
	}
	sent, got := r.front.requests(), r.up.agentRequests()
	compacted := 0
	for n := range got {
		if checkFaithfulIn(t, "input", sent[n].Body, got[n].Body) != nil {
			compacted++
			checkResponsesInput(t, got[n].Body)
		}
	}
	assert.Positive(t, compacted)
}

// TestResponsesStreamIsNotBuffered: the first event of a streamed answer
// reaches the client while the upstream still holds the rest.
func TestResponsesStreamIsNotBuffered(t *testing.T) {
	r := newRig(t, nil)
	r.up.hold, r.up.held = make(chan struct{}), make(chan bool, 1)
	req, err := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/responses", bytes.NewReader(codexBody(t, 2, true, nil)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "event: response.created\n", line)
	close(r.up.hold)
	assert.True(t, <-r.up.held, "the client saw the first event only after the upstream gave up")
}

// TestResponsesChainedPassesThrough: a request on previous_response_id
// holds only the newest items, the provider the rest; it goes through as
// sent, however large, and the metric says why.
func TestResponsesChainedPassesThrough(t *testing.T) {
	r := newRig(t, nil)
	body := codexBody(t, 20, false, map[string]any{"previous_response_id": "resp_0123"})
	resp, data := post(t, r.srv.URL+"/v1/responses", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	assert.Equal(t, string(body), string(got[0].Body))
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="previous_response_id",kind="responses"`))
	assert.Empty(t, r.up.summaryRequests())

	// A null previous_response_id chains nothing: the request is gated.
	body = codexBody(t, 20, false, map[string]any{"previous_response_id": nil})
	post(t, r.srv.URL+"/v1/responses", body, nil)
	got = r.up.agentRequests()
	require.Len(t, got, 2)
	require.NotNil(t, checkFaithfulIn(t, "input", body, got[1].Body))
}

// TestResponsesCompactEndpointPassesThrough: the provider's own
// compaction endpoint gets the agent's request as sent.
func TestResponsesCompactEndpointPassesThrough(t *testing.T) {
	r := newRig(t, nil)
	body := codexBody(t, 20, false, nil)
	resp, data := post(t, r.srv.URL+"/v1/responses/compact", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	other := r.up.otherRequests()
	require.Len(t, other, 1)
	assert.Equal(t, "/v1/responses/compact", other[0].Path)
	assert.Equal(t, string(body), string(other[0].Body))
	assert.Empty(t, r.up.agentRequests())
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="passthrough",kind="openai"`))
}

// TestResponsesOverflowIsRecovered: a context-overflow error to a
// Responses request is answered with one compaction and one retry.
func TestResponsesOverflowIsRecovered(t *testing.T) {
	r := newRig(t, func(o *Options) { o.Config = host.Config{ContextWindow: 200000, KeepRecentTokens: 1000} })
	r.up.overflowNext = 1
	body := codexBody(t, 6, false, nil)
	resp, data := post(t, r.srv.URL+"/v1/responses", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	got := r.up.agentRequests()
	require.Len(t, got, 2)
	assert.Equal(t, string(body), string(got[0].Body), "the first attempt went as sent")
	require.NotNil(t, checkFaithfulIn(t, "input", body, got[1].Body), "the retry was compacted")
	checkResponsesInput(t, got[1].Body)
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_overflow_retries_total{result="retried"`))
}

// TestResponsesWebSocket: with --websockets refuse, Codex's WebSocket is
// answered 426, after which Codex sends its turns over HTTP; with
// --websockets forward it is forwarded.
func TestResponsesWebSocket(t *testing.T) {
	upgrade := func(t *testing.T, url string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, url+"/v1/responses", nil)
		require.NoError(t, err)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	t.Run("refused", func(t *testing.T) {
		r := newRig(t, func(o *Options) { o.WebSockets = WebSocketsRefuse })
		resp := upgrade(t, r.srv.URL)
		assert.Equal(t, http.StatusUpgradeRequired, resp.StatusCode)
		var e struct {
			Error struct{ Message, Type string }
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		assert.Contains(t, e.Error.Message, "over HTTP")
		assert.Empty(t, r.up.otherRequests(), "nothing reached the upstream")
		assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="websocket_refused",kind="responses"`))
		assert.Contains(t, r.logs.String(), "answered 426")
	})
	t.Run("forwarded", func(t *testing.T) {
		r := newRig(t, func(o *Options) { o.WebSockets = WebSocketsForward })
		upgrade(t, r.srv.URL)
		other := r.up.otherRequests()
		require.Len(t, other, 1)
		assert.Equal(t, "websocket", other[0].Header.Get("Upgrade"))
		assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="websocket",kind="openai"`))
		assert.Contains(t, r.logs.String(), "forwarded uncompacted")
	})
}
