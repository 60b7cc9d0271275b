package realagent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func startUpstream(t *testing.T) *Upstream {
	t.Helper()
	u, err := StartUpstream("short answer")
	require.NoError(t, err)
	t.Cleanup(func() { u.Close() })
	return u
}

var client = &http.Client{Timeout: 30 * time.Second}

func post(t *testing.T, u *Upstream, path string, header http.Header, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u.URL()+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header = header
	resp, err := client.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type event struct {
	name string
	data map[string]any
}

// readEvents parses a server-sent event stream, checking that each
// event's data names the event as its type.
func readEvents(t *testing.T, r io.Reader) []event {
	t.Helper()
	var out []event
	sc := bufio.NewScanner(r)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d))
			assert.Equal(t, name, d["type"], "the data of event %s", name)
			out = append(out, event{name, d})
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func names(evs []event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.name)
	}
	return out
}

func TestUpstreamMessagesStream(t *testing.T) {
	u := startUpstream(t)
	body := `{"model":"claude-x","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi \u2192"}]}`
	resp := post(t, u, "/v1/messages", http.Header{"X-Api-Key": {"sk-ant-secret"}, "Anthropic-Version": {"2023-06-01"}}, body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	evs := readEvents(t, resp.Body)
	assert.Equal(t, []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}, names(evs))
	msg := obj(evs[0].data["message"])
	assert.Equal(t, "claude-x", msg["model"])
	assert.Equal(t, "assistant", msg["role"])
	assert.Equal(t, "short answer", obj(evs[3].data["delta"])["text"])
	assert.Equal(t, "end_turn", obj(evs[5].data["delta"])["stop_reason"])
	assert.Positive(t, obj(evs[5].data["usage"])["output_tokens"])

	reqs := u.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, body, string(reqs[0].Body), "the body is recorded byte for byte")
	assert.Equal(t, "[redacted]", reqs[0].Header.Get("X-Api-Key"), "a credential reached the recording")
}

func TestUpstreamMessagesJSON(t *testing.T) {
	u := startUpstream(t)
	resp := post(t, u, "/v1/messages", http.Header{"Content-Type": {"application/json"}}, `{"model":"m","messages":[]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var m struct {
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Content    []struct{ Type, Text string }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	assert.Equal(t, "message", m.Type)
	assert.Equal(t, "end_turn", m.StopReason)
	require.Len(t, m.Content, 1)
	assert.Equal(t, "short answer", m.Content[0].Text)

	resp = post(t, u, "/v1/messages/count_tokens", nil, `{"model":"m","messages":[{"role":"user","content":"abcdefgh"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var c struct {
		InputTokens int `json:"input_tokens"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&c))
	assert.Positive(t, c.InputTokens)
}

func TestUpstreamResponsesStream(t *testing.T) {
	u := startUpstream(t)
	resp := post(t, u, "/v1/responses", http.Header{"Authorization": {"Bearer sk-secret"}}, `{"model":"gpt-x","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs := readEvents(t, resp.Body)
	assert.Equal(t, []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}, names(evs))
	for i, e := range evs {
		assert.EqualValues(t, i, e.data["sequence_number"])
	}
	assert.Equal(t, "short answer", evs[4].data["delta"])
	done := obj(evs[len(evs)-1].data["response"])
	assert.Equal(t, "completed", done["status"])
	assert.Equal(t, obj(evs[0].data["response"])["id"], done["id"], "one response ID throughout")
	usage := obj(done["usage"])
	assert.Positive(t, usage["input_tokens"])
	assert.Equal(t, usage["total_tokens"], usage["input_tokens"].(float64)+usage["output_tokens"].(float64))
	assert.Equal(t, "[redacted]", u.Requests()[0].Header.Get("Authorization"))
}

func TestUpstreamResponsesCompaction(t *testing.T) {
	u := startUpstream(t)
	resp := post(t, u, "/v1/responses", nil, `{"model":"gpt-x","input":[{"type":"message","role":"user","content":[]},{"type":"compaction_trigger"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs := readEvents(t, resp.Body)
	assert.Equal(t, []string{"response.created", "response.in_progress", "response.output_item.added", "response.output_item.done", "response.completed"}, names(evs))
	output := list(obj(evs[len(evs)-1].data["response"])["output"])
	require.Len(t, output, 1, "Codex wants exactly one compaction item")
	assert.Equal(t, "compaction", obj(output[0])["type"])
	assert.Equal(t, CompactionContent, obj(output[0])["encrypted_content"])
}

// The agents' other requests: a WebSocket upgrade, an unknown path, a
// body that is not JSON, one over the limit, and traffic for other hosts
// sent through the proxy settings.
func TestUpstreamRefusals(t *testing.T) {
	u := startUpstream(t)
	u.bodyLimit = 1 << 10

	req, err := http.NewRequest(http.MethodGet, u.URL()+"/v1/responses", nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUpgradeRequired, resp.StatusCode)

	resp = post(t, u, "/v1/models", http.Header{"Anthropic-Version": {"2023-06-01"}}, "")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	var anth struct {
		Type  string `json:"type"`
		Error struct{ Type string }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&anth))
	assert.Equal(t, "error", anth.Type)
	assert.Equal(t, "not_found_error", anth.Error.Type)

	resp = post(t, u, "/v1/chat/completions", nil, "{}")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	var oa struct{ Error struct{ Type, Code string } }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&oa))
	assert.Equal(t, "unknown_url", oa.Error.Code)

	resp = post(t, u, "/v1/messages", nil, "not json")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp = post(t, u, "/v1/responses", nil, `{"input":"not items"}`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)

	resp = post(t, u, "/v1/messages", nil, `{"model":"`+strings.Repeat("x", 2<<10)+`"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	proxied := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: func(*http.Request) (*url.URL, error) { return url.Parse(u.URL()) }}}
	_, err = proxied.Get("https://api.example.com/v1/models")
	require.Error(t, err, "a CONNECT through the upstream must be refused")
	resp, err = proxied.Get("http://api.example.com/v1/models")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	var got []string
	for _, q := range u.Requests() {
		got = append(got, q.Method+" "+q.Path+" "+http.StatusText(q.Status))
	}
	assert.Equal(t, []string{
		"GET /v1/responses Upgrade Required",
		"POST /v1/models Not Found",
		"POST /v1/chat/completions Not Found",
		"POST /v1/messages Bad Request",
		"POST /v1/responses Bad Request",
		"POST /v1/messages Request Entity Too Large",
		"CONNECT api.example.com:443 Forbidden",
		"GET http://api.example.com/v1/models Forbidden",
	}, got)
	assert.True(t, u.Requests()[0].WebSocket)
}

func TestUpstreamRecordsAtMostItsLimit(t *testing.T) {
	u := startUpstream(t)
	u.requestLimit = 2
	for range 5 {
		resp := post(t, u, "/v1/messages/count_tokens", nil, "{}")
		assert.Equal(t, http.StatusOK, resp.StatusCode, "requests past the limit are still answered")
	}
	assert.Len(t, u.Requests(), 2)
	assert.Equal(t, 3, u.Dropped())
}

func TestUpstreamRequestsIsACopy(t *testing.T) {
	u := startUpstream(t)
	post(t, u, "/v1/messages", nil, `{"model":"m"}`)
	reqs := u.Requests()
	reqs[0].Path = "changed"
	assert.Equal(t, "/v1/messages", u.Requests()[0].Path)
	assert.True(t, bytes.Equal([]byte(`{"model":"m"}`), u.Requests()[0].Body))
}
