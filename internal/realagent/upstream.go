package realagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Limits of what an Upstream accepts: a resumed corpus session is a few
// MB, so 64 MiB is far above any honest request and far below what would
// exhaust a test's memory.
const (
	maxBodyBytes = 64 << 20
	maxRequests  = 1000
)

// Request is one request an Upstream received, as it arrived.
type Request struct {
	Method string
	// Path is the request's path without the query; for a CONNECT, the
	// host:port the client asked to reach.
	Path  string
	Query string
	// Header holds the request's headers; credentials are dropped.
	Header http.Header
	Body   []byte
	// WebSocket is set when the request asked to upgrade to a WebSocket;
	// the Upstream refuses the upgrade so the client falls back to HTTP.
	WebSocket bool
	// Status is the status code the Upstream answered with.
	Status int
}

// Upstream is a provider on loopback that speaks the Anthropic Messages
// and the OpenAI Responses wire formats, answers every model call with one
// short text and end of turn, and records every request whole.
//
// It also serves as the agents' HTTP(S) proxy: a CONNECT or an absolute
// URL for any other host is recorded and refused, so traffic that would
// have left the machine is seen instead of sent.
type Upstream struct {
	// Reply is the text of every answer.
	Reply string

	srv *http.Server
	ln  net.Listener
	url string
	// bodyLimit and requestLimit are maxBodyBytes and maxRequests, apart
	// so that a test can reach them cheaply.
	bodyLimit    int64
	requestLimit int
	mu           sync.Mutex
	reqs         []Request
	// dropped counts requests past maxRequests, recorded only as a number.
	dropped int
	seq     int
}

// StartUpstream listens on a free loopback port and serves until Close.
func StartUpstream(reply string) (*Upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fake upstream: listening on loopback: %w", err)
	}
	u := &Upstream{Reply: reply, ln: ln, url: "http://" + ln.Addr().String(), bodyLimit: maxBodyBytes, requestLimit: maxRequests}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

// URL is the Upstream's base URL, http://127.0.0.1:port.
func (u *Upstream) URL() string { return u.url }

// Close stops the Upstream and every connection it holds.
func (u *Upstream) Close() error { return u.srv.Close() }

// Requests returns a copy of the requests received so far, in order.
func (u *Upstream) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Request(nil), u.reqs...)
}

// Dropped is how many requests arrived after the first 1000, which are
// answered but not recorded.
func (u *Upstream) Dropped() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.dropped
}

// credentialHeaders never reach a recording: the runs use dummy keys, but
// a recording may be printed.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Proxy-Authorization", "Cookie"}

func (u *Upstream) record(r *http.Request, body []byte, ws bool, status int) {
	h := r.Header.Clone()
	for _, k := range credentialHeaders {
		if h.Get(k) != "" {
			h.Set(k, "[redacted]")
		}
	}
	path := r.URL.Path
	if r.Method == http.MethodConnect {
		path = r.Host
	} else if r.URL.IsAbs() {
		path = r.URL.Scheme + "://" + r.URL.Host + r.URL.Path
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) >= u.requestLimit {
		u.dropped++
		return
	}
	u.reqs = append(u.reqs, Request{Method: r.Method, Path: path, Query: r.URL.RawQuery, Header: h, Body: body, WebSocket: ws, Status: status})
}

func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A request for another host came through the proxy settings: it
	// would have left the machine.
	if r.Method == http.MethodConnect || (r.URL.IsAbs() && r.URL.Host != u.ln.Addr().String()) {
		u.record(r, nil, false, http.StatusForbidden)
		http.Error(w, "realagent: no network beyond loopback", http.StatusForbidden)
		return
	}
	if isWebSocket(r) {
		// 426 is what a server that speaks only HTTP to this path
		// answers; the agent is expected to fall back to HTTP.
		u.record(r, nil, true, http.StatusUpgradeRequired)
		http.Error(w, "WebSocket is not served here; use HTTP", http.StatusUpgradeRequired)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, u.bodyLimit))
	if err != nil {
		var tooBig *http.MaxBytesError
		status := http.StatusBadRequest
		if errors.As(err, &tooBig) {
			status = http.StatusRequestEntityTooLarge
		}
		u.record(r, nil, false, status)
		http.Error(w, "realagent: reading the body: "+err.Error(), status)
		return
	}
	var status int
	var answer func(http.ResponseWriter)
	switch path := strings.TrimSuffix(r.URL.Path, "/"); {
	case r.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		status, answer = u.countTokens(body)
	case r.Method == http.MethodPost && path == "/v1/messages":
		status, answer = u.messages(body)
	case r.Method == http.MethodPost && path == "/v1/responses":
		status, answer = u.responses(body)
	default:
		status, answer = notFound(r)
	}
	// Recorded before the answer: an agent may exit as soon as it has
	// read the last event, and the run reads the recording then.
	u.record(r, body, false, status)
	answer(w)
}

func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// The answers: each call is checked first, giving the status, and then
// answered by the function returned.

// notFound answers as each API answers an unknown path: Anthropic with its
// error envelope, OpenAI with its own.
func notFound(r *http.Request) (int, func(http.ResponseWriter)) {
	msg := fmt.Sprintf("Unknown request URL: %s %s", r.Method, r.URL.Path)
	if r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Api-Key") != "" {
		return jsonAnswer(http.StatusNotFound, map[string]any{"type": "error", "error": map[string]any{"type": "not_found_error", "message": msg}})
	}
	return jsonAnswer(http.StatusNotFound, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": "unknown_url"}})
}

// jsonAnswer answers with status and v as a JSON body.
func jsonAnswer(status int, v any) (int, func(http.ResponseWriter)) {
	return status, func(w http.ResponseWriter) {
		b, _ := json.Marshal(v)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(b)
	}
}

func (u *Upstream) nextID(prefix string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seq++
	return fmt.Sprintf("%s_realagent%04d", prefix, u.seq)
}

// inputTokens is the usage an answer reports: a quarter of the request's
// bytes, so the agent's own accounting sees a plausible size.
func inputTokens(body []byte) int { return len(body)/4 + 1 }

func (u *Upstream) countTokens(body []byte) (int, func(http.ResponseWriter)) {
	return jsonAnswer(http.StatusOK, map[string]any{"input_tokens": inputTokens(body)})
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// messages answers a Messages call: streamed with the event sequence of
// the API (message_start, content_block_start, content_block_delta,
// content_block_stop, message_delta with the usage, message_stop) when
// the request asks for a stream, one JSON message when it does not.
func (u *Upstream) messages(body []byte) (int, func(http.ResponseWriter)) {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return jsonAnswer(http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": "the body is not JSON: " + err.Error()}})
	}
	id := u.nextID("msg")
	in, out := inputTokens(body), len(strings.Fields(u.Reply))+1
	if !req.Stream {
		return jsonAnswer(http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content":     []any{map[string]any{"type": "text", "text": u.Reply}},
			"stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": in, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
	}
	return http.StatusOK, func(w http.ResponseWriter) { u.streamMessage(w, id, req.Model, in, out) }
}

func (u *Upstream) streamMessage(w http.ResponseWriter, id, model string, in, out int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
	sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	sse(w, "ping", map[string]any{"type": "ping"})
	sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": u.Reply}})
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
		"usage": map[string]any{"input_tokens": in, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// responses answers a Responses call with the streamed event sequence of
// the API: response.created, response.output_item.added, the text part,
// response.output_text.delta, response.output_item.done and
// response.completed with the usage.
func (u *Upstream) responses(body []byte) (int, func(http.ResponseWriter)) {
	var req struct {
		Model string            `json:"model"`
		Input []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return jsonAnswer(http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "the body is not a Responses request: " + err.Error(), "type": "invalid_request_error", "param": nil, "code": nil}})
	}
	return http.StatusOK, func(w http.ResponseWriter) { u.streamResponse(w, body, req.Model, compactionRequested(req.Input)) }
}

func (u *Upstream) streamResponse(w http.ResponseWriter, body []byte, model string, compaction bool) {
	respID, itemID := u.nextID("resp"), u.nextID("msg")
	in, out := inputTokens(body), len(strings.Fields(u.Reply))+1
	created := time.Now().Unix()
	response := func(status string, output []any, usage any) map[string]any {
		return map[string]any{"id": respID, "object": "response", "created_at": created, "status": status,
			"model": model, "output": output, "usage": usage}
	}
	usage := map[string]any{
		"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": in + out}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		sse(w, typ, fields)
	}
	ev("response.created", map[string]any{"response": response("in_progress", []any{}, nil)})
	ev("response.in_progress", map[string]any{"response": response("in_progress", []any{}, nil)})
	if compaction {
		// Codex compacts by asking for exactly one compaction item, whose
		// opaque content it sends back in place of the history.
		item := map[string]any{"id": u.nextID("cmp"), "type": "compaction", "encrypted_content": CompactionContent}
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": item})
		ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
		ev("response.completed", map[string]any{"response": response("completed", []any{item}, usage)})
		return
	}
	part := map[string]any{"type": "output_text", "text": u.Reply, "annotations": []any{}}
	item := map[string]any{"id": itemID, "type": "message", "role": "assistant", "status": "completed", "content": []any{part}}
	ev("response.output_item.added", map[string]any{"output_index": 0,
		"item": map[string]any{"id": itemID, "type": "message", "role": "assistant", "status": "in_progress", "content": []any{}}})
	ev("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0,
		"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	ev("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": u.Reply})
	ev("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": u.Reply})
	ev("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part})
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": response("completed", []any{item}, usage)})
}

// CompactionContent is the opaque content of the compaction item the
// Upstream answers a Codex compaction request with.
const CompactionContent = "realagent-compaction-summary"

// compactionRequested reports whether a Responses input ends with the
// item by which Codex asks for a compaction.
func compactionRequested(input []json.RawMessage) bool {
	if len(input) == 0 {
		return false
	}
	var last struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(input[len(input)-1], &last) == nil && last.Type == "compaction_trigger"
}
