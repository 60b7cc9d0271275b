package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wsUpstream is a loopback Responses API provider over WebSocket, as the
// API serves it: each response.create is answered with the event
// sequence of a streamed response, and a request chained on
// previous_response_id extends the history the provider holds for that
// response. Every other request goes to the HTTP upstream (the summary
// calls).
type wsUpstream struct {
	http *upstream
	srv  *httptest.Server
	// overflowAbove answers a request whose whole input is over so many
	// bytes with a context_length_exceeded failure; 0 never.
	overflowAbove int
	// refuse answers the upgrade with 426.
	refuse bool

	mu sync.Mutex
	// calls are the requests received, in order.
	calls []wsCall
	held  map[string][][]byte
	seq   int
}

// wsCall is one response.create as the upstream received it.
type wsCall struct {
	Raw []byte
	// Chained is the previous_response_id it named, if any.
	Chained string
	// Input is the whole input it stands for: the history held for the
	// response it was chained on, then its own items.
	Input [][]byte
	// Failed is set when it was answered with an overflow.
	Failed bool
}

func newWSUpstream(t testing.TB) *wsUpstream {
	u := &wsUpstream{http: newUpstream(t), held: map[string][][]byte{}}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			u.http.serve(w, r)
			return
		}
		u.serveWS(t, w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *wsUpstream) url(t testing.TB) *url.URL {
	v, err := url.Parse(u.srv.URL)
	require.NoError(t, err)
	return v
}

func (u *wsUpstream) received() []wsCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]wsCall(nil), u.calls...)
}

func (u *wsUpstream) serveWS(t testing.TB, w http.ResponseWriter, r *http.Request) {
	if u.refuse {
		http.Error(w, `{"error":{"message":"WebSockets are not served here","type":"invalid_request_error"}}`, http.StatusUpgradeRequired)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	ctx := r.Context()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var req struct {
			Type     string            `json:"type"`
			Previous string            `json:"previous_response_id"`
			Input    []json.RawMessage `json:"input"`
			Model    string            `json:"model"`
		}
		if json.Unmarshal(data, &req) != nil || req.Type != "response.create" {
			c.Write(ctx, websocket.MessageText, []byte(`{"type":"error","status":400,"error":{"type":"invalid_request_error","message":"not a response.create"}}`))
			continue
		}
		u.mu.Lock()
		call := wsCall{Raw: data, Chained: req.Previous}
		if req.Previous != "" {
			h, ok := u.held[req.Previous]
			if !ok {
				u.mu.Unlock()
				c.Write(ctx, websocket.MessageText, []byte(`{"type":"error","status":400,"error":{"type":"invalid_request_error","code":"previous_response_not_found","message":"Previous response not found."}}`))
				continue
			}
			call.Input = append(call.Input, h...)
		}
		for _, it := range req.Input {
			call.Input = append(call.Input, []byte(it))
		}
		size := 0
		for _, it := range call.Input {
			size += len(it)
		}
		u.seq++
		n := u.seq
		id := fmt.Sprintf("resp_ws%03d", n)
		call.Failed = u.overflowAbove > 0 && size > u.overflowAbove
		u.calls = append(u.calls, call)
		u.mu.Unlock()
		send := func(v string) {
			require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(v)))
		}
		send(fmt.Sprintf(`{"type":"response.created","sequence_number":0,"response":{"id":%q,"object":"response","status":"in_progress","model":%q,"output":[]}}`, id, req.Model))
		if call.Failed {
			send(fmt.Sprintf(`{"type":"response.failed","sequence_number":1,"response":{"id":%q,"object":"response","status":"failed","model":%q,"output":[],"error":{"code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again."}}}`, id, req.Model))
			continue
		}
		reasoning := fmt.Sprintf(`{"id":"rs_ws%03d","type":"reasoning","summary":[],"encrypted_content":"gAAAAB-ws-%03d-%s"}`, n, n, strings.Repeat("e", 40))
		msg := fmt.Sprintf(`{"id":"msg_ws%03d","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"reply %d"}]}`, n, n)
		send(fmt.Sprintf(`{"type":"response.output_item.done","sequence_number":1,"output_index":0,"item":%s}`, reasoning))
		send(fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":2,"output_index":1,"content_index":0,"delta":"reply %d"}`, n))
		send(fmt.Sprintf(`{"type":"response.output_item.done","sequence_number":3,"output_index":1,"item":%s}`, msg))
		u.mu.Lock()
		u.held[id] = append(append([][]byte(nil), call.Input...), []byte(reasoning), []byte(msg))
		u.mu.Unlock()
		send(fmt.Sprintf(`{"type":"response.completed","sequence_number":4,"response":{"id":%q,"object":"response","status":"completed","model":%q,"output":[%s,%s],"usage":{"input_tokens":%d,"output_tokens":5,"total_tokens":%d}}}`,
			id, req.Model, reasoning, msg, size/4, size/4+5))
	}
}

// wsRig is a proxy relaying WebSockets to a wsUpstream.
type wsRig struct {
	up    *wsUpstream
	proxy *Proxy
	srv   *httptest.Server
	logs  *syncBuffer
}

func newWSRig(t testing.TB, edit func(*Options)) *wsRig {
	t.Helper()
	up := newWSUpstream(t)
	logs := &syncBuffer{}
	o := Options{Upstream: up.url(t), Config: smallWindow, Registry: registry, CompactionModel: summaryModel,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if edit != nil {
		edit(&o)
	}
	p, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return &wsRig{up: up, proxy: p, srv: srv, logs: logs}
}

func (r *wsRig) dial(t testing.TB) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.srv.URL, "http")+"/v1/responses",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testKey}}})
	require.NoError(t, err)
	c.SetReadLimit(-1)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// wsClient follows a conversation as Codex does over a WebSocket: the
// first request whole, every later one chained on the previous response
// with only the items that follow its output.
type wsClient struct {
	c      *websocket.Conn
	full   [][]byte // the conversation as of the last response
	lastID string
}

// turn sends the new items and reads the response's events; it returns
// the events as they came.
func (cl *wsClient) turn(t testing.TB, items ...[]byte) (events [][]byte) {
	t.Helper()
	req := map[string]any{"type": "response.create", "model": "gpt-5-codex", "instructions": "You are Codex, a coding agent.",
		"tools":       []map[string]any{{"type": "function", "name": "shell", "parameters": map[string]any{"type": "object"}}},
		"tool_choice": "auto", "parallel_tool_calls": false, "reasoning": map[string]any{"effort": "medium", "summary": "auto"},
		"store": false, "stream": true, "include": []string{"reasoning.encrypted_content"}, "prompt_cache_key": "019f36b8-ws"}
	input := items
	if cl.lastID != "" {
		req["previous_response_id"] = cl.lastID
	} else {
		input = append(append([][]byte(nil), cl.full...), items...)
	}
	raws := make([]json.RawMessage, len(input))
	for i, it := range input {
		raws[i] = it
	}
	req["input"] = raws
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(req))
	body := bytes.TrimSpace(buf.Bytes())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.c.Write(ctx, websocket.MessageText, body))
	cl.full = append(cl.full, items...)
	for {
		_, data, err := cl.c.Read(ctx)
		require.NoError(t, err)
		events = append(events, data)
		var ev wsEvent
		require.NoError(t, json.Unmarshal(data, &ev))
		switch ev.Type {
		case "response.output_item.done":
			cl.full = append(cl.full, []byte(ev.Item))
		case "response.completed":
			cl.lastID = ev.Response.ID
			return events
		case "response.failed", "error":
			t.Fatalf("the client got a failure: %s", data)
		}
	}
}

func userItem(text string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": text}}})
	return b
}

// TestWebSocketRelayCompactsAChainedConversation drives a Codex-shaped
// conversation over a relayed WebSocket across the window: the requests
// go on chained and byte for byte until one is compacted; that one goes
// whole, and every later one goes chained again, extending it.
func TestWebSocketRelayCompactsAChainedConversation(t *testing.T) {
	r := newWSRig(t, nil)
	cl := &wsClient{c: r.dial(t)}
	cl.full = [][]byte{[]byte(`{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>workspace-write</permissions instructions>"}]}`)}
	const turns = 14
	var clientViews [][][]byte
	for i := range turns {
		events := cl.turn(t, userItem(turnText(i)))
		require.GreaterOrEqual(t, len(events), 5, "every event reached the client")
		assert.Contains(t, string(events[len(events)-1]), fmt.Sprintf(`"id":"resp_ws%03d"`, i+1))
		clientViews = append(clientViews, append([][]byte(nil), cl.full[:len(cl.full)-2]...))
	}
	calls := r.up.received()
	require.Len(t, calls, turns)
	compacted := -1
	for n, call := range calls {
		client := clientViews[n]
		if compacted < 0 && slices.EqualFunc(call.Input, client, bytes.Equal) {
			if n > 0 {
				assert.NotEmpty(t, call.Chained, "request %d went whole though nothing was folded", n+1)
			}
			continue
		}
		if compacted < 0 {
			compacted = n
			assert.Empty(t, call.Chained, "the compacted request %d went chained", n+1)
			assert.Less(t, len(call.Input), len(client), "request %d was compacted", n+1)
			// The kept items are the client's own, byte for byte.
			kept := call.Input[len(call.Input)-1]
			assert.Equal(t, string(client[len(client)-1]), string(kept))
			continue
		}
		assert.NotEmpty(t, call.Chained, "request %d after the compaction went whole", n+1)
		base := calls[compacted].Input
		require.GreaterOrEqual(t, len(call.Input), len(base))
		assert.True(t, slices.EqualFunc(call.Input[:len(base)], base, bytes.Equal), "request %d does not extend the compacted request byte for byte", n+1)
	}
	require.Positive(t, compacted, "no request was compacted")
	t.Logf("compacted at request %d of %d: %d items to %d", compacted+1, turns, len(clientViews[compacted]), len(calls[compacted].Input))
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, "compact_host_proxy_compactions_total"))
	// Reasoning items arrive as the upstream wrote them.
	for _, call := range calls {
		for _, it := range call.Input {
			if bytes.Contains(it, []byte(`"type":"reasoning"`)) {
				assert.Regexp(t, `"encrypted_content":"gAAAAB-ws-\d{3}-e{40}"`, string(it))
			}
		}
	}
	assert.NotContains(t, r.logs.String(), testKey, "a log line holds the key")
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="websocket_relayed"`))
}

// TestWebSocketOverflowIsRetriedCompacted: an overflow the upstream
// reports over the socket is compacted and retried once; the client sees
// the retry's answer, never the failure.
func TestWebSocketOverflowIsRetriedCompacted(t *testing.T) {
	// A window the gate never reaches: only the overflow compacts.
	r := newWSRig(t, func(o *Options) { o.Config.ContextWindow = 200000 })
	r.up.overflowAbove = 12000
	cl := &wsClient{c: r.dial(t)}
	for i := range 8 {
		cl.turn(t, userItem(turnText(i)))
	}
	calls := r.up.received()
	failed := 0
	for n, call := range calls {
		if call.Failed {
			failed++
			require.Less(t, n+1, len(calls))
			retry := calls[n+1]
			assert.Empty(t, retry.Chained, "the retry goes whole")
			assert.False(t, retry.Failed, "the retry fits")
			assert.Less(t, len(retry.Input), len(call.Input))
		}
	}
	require.Positive(t, failed, "no request overflowed")
	assert.Equal(t, float64(failed), metricValue(t, r.srv.URL, `compact_host_proxy_overflow_retries_total{result="retried"`))
}

// TestWebSocketHostileClients: every way a client can misuse the relay
// ends with a close code that says why.
func TestWebSocketHostileClients(t *testing.T) {
	read := func(t *testing.T, c *websocket.Conn) websocket.StatusCode {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return websocket.CloseStatus(err)
			}
		}
	}
	t.Run("binary", func(t *testing.T) {
		r := newWSRig(t, nil)
		c := r.dial(t)
		require.NoError(t, c.Write(context.Background(), websocket.MessageBinary, []byte{0, 1, 2}))
		assert.Equal(t, websocket.StatusUnsupportedData, read(t, c))
	})
	t.Run("too big", func(t *testing.T) {
		r := newWSRig(t, func(o *Options) { o.MaxBodyBytes = 1024 })
		c := r.dial(t)
		require.NoError(t, c.Write(context.Background(), websocket.MessageText, bytes.Repeat([]byte("x"), maxMessageFactor*1024+1)))
		assert.Equal(t, websocket.StatusMessageTooBig, read(t, c))
	})
	t.Run("over the body limit goes on untouched", func(t *testing.T) {
		r := newWSRig(t, func(o *Options) { o.MaxBodyBytes = 4096 })
		cl := &wsClient{c: r.dial(t)}
		cl.turn(t, userItem(strings.Repeat("long ", 2000)))
		calls := r.up.received()
		require.Len(t, calls, 1)
		assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="oversized",kind="responses"`))
	})
	t.Run("stalled", func(t *testing.T) {
		r := newWSRig(t, func(o *Options) { o.BodyReadTimeout = 200 * time.Millisecond })
		// By hand: a client library would not leave a message unfinished.
		conn, err := net.Dial("tcp", strings.TrimPrefix(r.srv.URL, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		fmt.Fprintf(conn, "GET /v1/responses HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", conn.RemoteAddr())
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		// A text frame without FIN, masked with a zero key, and nothing after.
		part := []byte(`{"type":"response.create","input":[`)
		frame := append([]byte{0x01, 0x80 | byte(len(part)), 0, 0, 0, 0}, part...)
		_, err = conn.Write(frame)
		require.NoError(t, err)
		head := make([]byte, 4)
		_, err = io.ReadFull(br, head)
		require.NoError(t, err)
		assert.Equal(t, byte(0x88), head[0], "a close frame")
		assert.Equal(t, websocket.StatusPolicyViolation, websocket.StatusCode(binary.BigEndian.Uint16(head[2:])))
	})
	t.Run("idle", func(t *testing.T) {
		r := newWSRig(t, func(o *Options) { o.WebSocketIdleTimeout = 200 * time.Millisecond })
		c := r.dial(t)
		assert.Equal(t, websocket.StatusGoingAway, read(t, c))
		assert.Contains(t, r.logs.String(), "idle")
	})
	t.Run("not a request", func(t *testing.T) {
		r := newWSRig(t, nil)
		c := r.dial(t)
		require.NoError(t, c.Write(context.Background(), websocket.MessageText, []byte(`{"type":"session.update"}`)))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, data, err := c.Read(ctx)
		require.NoError(t, err)
		assert.Contains(t, string(data), "not a response.create", "the upstream's own answer came back")
	})
}

// TestWebSocketUpstreamRefusal: an upstream that refuses the upgrade is
// heard by the client as it answered, so Codex falls back to HTTP.
func TestWebSocketUpstreamRefusal(t *testing.T) {
	r := newWSRig(t, nil)
	r.up.refuse = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.srv.URL, "http")+"/v1/responses", nil)
	require.Error(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusUpgradeRequired, resp.StatusCode)
}

func TestWebSocketsOption(t *testing.T) {
	_, err := New(Options{Upstream: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}, WebSockets: "tunnel"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want relay, refuse or forward")
}

// TestWebSocketUnknownChainPassesThrough: a request chained on a response
// the relay did not follow (here, one of another connection) goes on as
// it came, counted as chained; the relay cannot see its history.
func TestWebSocketUnknownChainPassesThrough(t *testing.T) {
	r := newWSRig(t, nil)
	first := &wsClient{c: r.dial(t)}
	first.turn(t, userItem("list the files"))
	second := &wsClient{c: r.dial(t), lastID: first.lastID}
	second.turn(t, userItem("and now the tests"))
	calls := r.up.received()
	require.Len(t, calls, 2)
	assert.Equal(t, first.lastID, calls[1].Chained)
	sent := topLevel(t, calls[1].Raw)
	assert.JSONEq(t, `[`+string(userItem("and now the tests"))+`]`, string(sent["input"]), "the request went as it came")
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="previous_response_id",kind="responses"`))
}
