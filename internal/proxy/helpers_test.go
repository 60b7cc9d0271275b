package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/internal/testwasm"
	"github.com/stretchr/testify/require"
)

// registry holds the built-in plugins, compiled once for the test binary.
var registry *plugin.Registry

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "proxy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cache, err := testwasm.ShareCompiled(filepath.Join(dir, "wazero"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	registry, err = plugin.NewRegistry(context.Background(), plugin.Options{
		Wasm: wasm.Runtime, Builtins: wasm.Builtins, Process: process.Runtime,
		PluginsDir: filepath.Join(dir, "plugins"), CacheDir: cache, NoWatch: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer registry.Close()
	// Compile the built-in strategies before any test's deadline runs:
	// under -race the first compile takes a minute.
	for _, name := range []string{"structured", "narrative", "truncate"} {
		if _, err := registry.Strategy(context.Background(), name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// exchangeRecord is one request as a server received it.
type exchangeRecord struct {
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// summaryModel is the compaction model the tests configure; the upstream
// tells summary calls from the agent's by it.
const summaryModel = "claude-haiku-4-5"

// upstream is a loopback provider speaking the Anthropic Messages and
// OpenAI Chat Completions wire formats, streamed and not. It records every
// request it receives.
type upstream struct {
	t   testing.TB
	srv *httptest.Server

	mu        sync.Mutex
	agent     []exchangeRecord // the agent's requests
	summaries []exchangeRecord // the summary calls
	other     []exchangeRecord // everything else
	// overflowNext answers that many agent requests with an overflow.
	overflowNext int
	// hold, when set, is waited on after the first streamed event.
	hold chan struct{}
	// held reports whether hold was closed before the upstream gave up.
	held chan bool
	// onSummary, when set, answers the summary calls instead of the
	// scripted summary.
	onSummary http.HandlerFunc
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{t: t}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) url() *url.URL {
	v, err := url.Parse(u.srv.URL)
	require.NoError(u.t, err)
	return v
}

func (u *upstream) agentRequests() []exchangeRecord {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]exchangeRecord(nil), u.agent...)
}

func (u *upstream) summaryRequests() []exchangeRecord {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]exchangeRecord(nil), u.summaries...)
}

func (u *upstream) otherRequests() []exchangeRecord {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]exchangeRecord(nil), u.other...)
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec := exchangeRecord{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	var req struct {
		Model    string            `json:"model"`
		Stream   bool              `json:"stream"`
		Messages []json.RawMessage `json:"messages"`
	}
	responses := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/responses")
	isMessages := strings.HasSuffix(r.URL.Path, "/v1/messages") || strings.HasSuffix(r.URL.Path, "/chat/completions") || responses
	if !isMessages || json.Unmarshal(body, &req) != nil {
		u.mu.Lock()
		u.other = append(u.other, rec)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q,"echo":%s}`, r.URL.Path, jsonOr(body))
		return
	}
	anthropic := strings.HasSuffix(r.URL.Path, "/v1/messages")
	u.mu.Lock()
	summary := req.Model == summaryModel || req.Model == "gpt-4.1-mini"
	overflow := false
	if summary {
		u.summaries = append(u.summaries, rec)
	} else {
		u.agent = append(u.agent, rec)
		if u.overflowNext > 0 {
			u.overflowNext--
			overflow = true
		}
	}
	turn := len(u.agent)
	hold, held, onSummary := u.hold, u.held, u.onSummary
	u.mu.Unlock()
	if summary && onSummary != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		onSummary(w, r)
		return
	}

	switch {
	case summary && responses:
		streamResponses(w, req.Model, "## Goal\nThe scripted task.\n## Progress\nEarlier turns were about the parser.", len(body)/4, nil, nil)
	case overflow && responses:
		writeJSON(w, http.StatusBadRequest, `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`)
	case responses && req.Stream:
		streamResponses(w, req.Model, fmt.Sprintf("reply %d", turn), len(body)/4, hold, held)
	case responses:
		writeJSON(w, http.StatusOK, responsesObject(req.Model, fmt.Sprintf("reply %d", turn), len(body)/4))
	case overflow && anthropic:
		writeJSON(w, http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`)
	case overflow:
		writeJSON(w, http.StatusBadRequest, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130211 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
	case summary:
		text := "## Goal\nThe scripted task.\n## Progress\nEarlier turns were about the parser."
		if anthropic {
			writeJSON(w, http.StatusOK, anthropicMessage(req.Model, text, len(body)/4))
		} else {
			writeJSON(w, http.StatusOK, openAIMessage(req.Model, text, len(body)/4))
		}
	case req.Stream:
		text := fmt.Sprintf("reply %d", turn)
		if anthropic {
			streamAnthropic(w, req.Model, text, len(body)/4, hold, held)
		} else {
			streamOpenAI(w, req.Model, text, len(body)/4, hold, held)
		}
	default:
		text := fmt.Sprintf("reply %d", turn)
		if anthropic {
			writeJSON(w, http.StatusOK, anthropicMessage(req.Model, text, len(body)/4))
		} else {
			writeJSON(w, http.StatusOK, openAIMessage(req.Model, text, len(body)/4))
		}
	}
}

func jsonOr(b []byte) string {
	if json.Valid(b) && len(b) > 0 {
		return string(b)
	}
	q, _ := json.Marshal(string(b))
	return string(q)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func quote(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

func anthropicMessage(model, text string, in int) string {
	return fmt.Sprintf(`{"id":"msg_01","type":"message","role":"assistant","model":%s,"content":[{"type":"text","text":%s}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":5}}`,
		quote(model), quote(text), in)
}

func openAIMessage(model, text string, in int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":%s,"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":5,"total_tokens":%d}}`,
		quote(model), quote(text), in, in+5)
}

// holdAfterFirst flushes the first event, then waits for the test to
// see it at the client before sending the rest.
func holdAfterFirst(w http.ResponseWriter, hold chan struct{}, held chan bool) {
	w.(http.Flusher).Flush()
	if hold == nil {
		return
	}
	select {
	case <-hold:
		held <- true
	case <-time.After(2 * time.Minute): // a hang guard
		held <- false
	}
}

func streamAnthropic(w http.ResponseWriter, model, text string, in int, hold chan struct{}, held chan bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	ev := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":%s,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":1}}}`, quote(model), in))
	holdAfterFirst(w, hold, held)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	half := len(text) / 2
	ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%s}}`, quote(text[:half])))
	ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%s}}`, quote(text[half:])))
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`)
	ev("message_stop", `{"type":"message_stop"}`)
}

func streamOpenAI(w http.ResponseWriter, model, text string, in int, hold chan struct{}, held chan bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":%s,\"choices\":[{\"index\":0,\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}]}\n\n", quote(model), delta, finish)
	}
	chunk(`{"role":"assistant","content":""}`, "null")
	holdAfterFirst(w, hold, held)
	half := len(text) / 2
	chunk(fmt.Sprintf(`{"content":%s}`, quote(text[:half])), "null")
	chunk(fmt.Sprintf(`{"content":%s}`, quote(text[half:])), "null")
	chunk(`{}`, `"stop"`)
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":%s,\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":5,\"total_tokens\":%d}}\n\n", quote(model), in, in+5)
	io.WriteString(w, "data: [DONE]\n\n")
}

// responsesObject is a completed Responses API response holding text.
func responsesObject(model, text string, in int) string {
	return fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1700000000,"status":"completed","error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":%s,"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":%s,"annotations":[]}]}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":false,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d},"metadata":{}}`,
		quote(model), quote(text), in, in+5)
}

// streamResponses streams a Responses API answer as its SSE events.
func streamResponses(w http.ResponseWriter, model, text string, in int, hold chan struct{}, held chan bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	ev := func(name, data string) {
		fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", name, name, seq, data)
		seq++
	}
	created := strings.Replace(responsesObject(model, "", in), `"status":"completed"`, `"status":"in_progress"`, 1)
	ev("response.created", `"response":`+created)
	holdAfterFirst(w, hold, held)
	ev("response.output_item.added", `"output_index":0,"item":{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]}`)
	ev("response.content_part.added", `"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`)
	half := len(text) / 2
	ev("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":`+quote(text[:half]))
	ev("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":`+quote(text[half:]))
	ev("response.output_text.done", `"item_id":"msg_1","output_index":0,"content_index":0,"text":`+quote(text))
	ev("response.content_part.done", `"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":`+quote(text)+`,"annotations":[]}`)
	ev("response.output_item.done", `"output_index":0,"item":{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":`+quote(text)+`,"annotations":[]}]}`)
	ev("response.completed", `"response":`+responsesObject(model, text, in))
}

// front records what clients send to the proxy, before the proxy sees it.
type front struct {
	mu   sync.Mutex
	reqs []exchangeRecord
	next http.Handler
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, AdminPrefix) {
		f.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, exchangeRecord{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	f.next.ServeHTTP(w, r)
}

func (f *front) requests() []exchangeRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]exchangeRecord(nil), f.reqs...)
}

// smallWindow makes a scripted conversation cross the compaction point
// after a dozen turns: budget 7,000 (max_tokens 1,000), compaction at 75%.
var smallWindow = host.Config{ContextWindow: 8000, KeepRecentTokens: 1000}

// rig is a proxy between a recording front and a loopback upstream.
type rig struct {
	up    *upstream
	proxy *Proxy
	front *front
	srv   *httptest.Server
	logs  *syncBuffer
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newRig(t testing.TB, edit func(*Options)) *rig {
	t.Helper()
	up := newUpstream(t)
	logs := &syncBuffer{}
	o := Options{
		Upstream: up.url(), Config: smallWindow, Registry: registry, CompactionModel: summaryModel,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&o)
	}
	p, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	f := &front{next: p}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return &rig{up: up, proxy: p, front: f, srv: srv, logs: logs}
}

// topLevel splits a JSON object into its raw fields.
func topLevel(t testing.TB, body []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m), "body: %.300s", body)
	return m
}

// rawMessages splits a request's messages into their raw elements.
func rawMessages(t testing.TB, body []byte) []json.RawMessage {
	t.Helper()
	return rawArray(t, "messages", body)
}

// rawArray splits the array under key into its raw elements.
func rawArray(t testing.TB, key string, body []byte) []json.RawMessage {
	t.Helper()
	var msgs []json.RawMessage
	require.NoError(t, json.Unmarshal(topLevel(t, body)[key], &msgs))
	return msgs
}

// metricValue reads one sample of the proxy's metrics page.
func metricValue(t testing.TB, baseURL, series string) float64 {
	t.Helper()
	resp, err := http.Get(baseURL + AdminPrefix + "metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	total := 0.0
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, series)
		if ok && rest != "" && strings.ContainsRune(" {,}", rune(rest[0])) {
			var v float64
			fields := strings.Fields(line)
			fmt.Sscan(fields[len(fields)-1], &v)
			total += v
		}
	}
	return total
}

func newJSONLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
