package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/compact-host/compact-host/host/overflow"
)

// What the proxy does with a Responses API WebSocket (GET /v1/responses
// with an upgrade), the transport Codex prefers.
const (
	// WebSocketsRelay relays it: each response.create message is gated
	// and compacted as an HTTP request is, and the upstream's events go
	// back as they arrive. The default.
	WebSocketsRelay = "relay"
	// WebSocketsRefuse answers 426 Upgrade Required; Codex then sends its
	// requests over HTTP, where they are compacted.
	WebSocketsRefuse = "refuse"
	// WebSocketsForward forwards the WebSocket untouched, uncompacted.
	WebSocketsForward = "forward"
)

const (
	// DefaultWebSocketIdleTimeout closes a relayed WebSocket (1001) on
	// which nothing moved for so long, either way.
	DefaultWebSocketIdleTimeout = 15 * time.Minute
	// maxMessageFactor times MaxBodyBytes is the largest client message a
	// relay takes: above MaxBodyBytes it is streamed on untouched, above
	// this the connection is closed (1009).
	maxMessageFactor = 8
	// wsDialTimeout bounds the upstream's WebSocket handshake.
	wsDialTimeout = 30 * time.Second
)

// wsHandshakeHeaders are the headers of the client's upgrade that belong
// to its own hop; the relay's dial sets its own.
var wsHandshakeHeaders = []string{"Connection", "Upgrade", "Sec-Websocket-Key", "Sec-Websocket-Version",
	"Sec-Websocket-Extensions", "Sec-Websocket-Protocol", "Sec-Websocket-Accept", "Host", "Content-Length",
	"Te", "Trailer", "Transfer-Encoding", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization"}

// relay is one relayed Responses WebSocket: the client's connection, the
// upstream's, and what the relay knows of the conversation on it.
type relay struct {
	p      *Proxy
	ctx    context.Context
	cancel context.CancelFunc
	path   string
	header http.Header
	cred   credentials
	log    *slog.Logger
	client *websocket.Conn
	up     *websocket.Conn
	// active is when a message last moved, either way (UnixNano).
	active atomic.Int64
	// lastSize is the size of the client's previous message.
	lastSize int64

	mu sync.Mutex
	// pending are the requests sent upstream whose responses have not
	// finished, oldest first.
	pending []*wsTurn
	// last is the newest completed response: its ID, the whole input the
	// client sees behind it and the one the upstream holds (they differ
	// once a compaction was sent), each with the response's output.
	last *wsHistory
}

// wsHistory is a conversation as of a completed response.
type wsHistory struct {
	id             string
	client, stored [][]byte
}

// wsTurn is one response.create on its way.
type wsTurn struct {
	x *exchange
	// client and sent are the turn's whole input as the client sees it
	// and as the upstream holds it; nil when the relay does not know
	// (a request forwarded untouched without a known history).
	client, sent [][]byte
	outputs      [][]byte
	retried      bool
}

// relayWebSocket serves a Responses WebSocket by relaying it.
func (p *Proxy) relayWebSocket(w http.ResponseWriter, r *http.Request) {
	cred := p.credentialsOf(r)
	log := slog.New(p.logs.WithKnown(cred.known...)).With("kind", kindResponses, "transport", "websocket")
	u := *p.o.Upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + r.URL.Path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	h := r.Header.Clone()
	for _, k := range wsHandshakeHeaders {
		h.Del(k)
	}
	dctx, cancel := context.WithTimeout(r.Context(), wsDialTimeout)
	defer cancel()
	up, resp, err := websocket.Dial(dctx, u.String(), &websocket.DialOptions{
		HTTPClient:   &http.Client{Transport: p.o.Transport},
		HTTPHeader:   h,
		Host:         p.o.Upstream.Host,
		Subprotocols: websocketProtocols(r.Header),
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			// The upstream's own refusal (426 among them) goes back as it
			// came, so the agent acts on it as it would without the proxy.
			p.m.requests.WithLabelValues(kindResponses, "websocket_upstream_refused").Inc()
			log.Info("the upstream refused the WebSocket; its answer goes back to the client", "status", resp.StatusCode)
			for k, v := range resp.Header {
				if !strings.EqualFold(k, "Content-Length") && !strings.EqualFold(k, "Connection") && !strings.EqualFold(k, "Upgrade") {
					w.Header()[k] = v
				}
			}
			w.WriteHeader(resp.StatusCode)
			if resp.Body != nil {
				io.Copy(w, resp.Body)
			}
			return
		}
		p.upstreamError(w, r, err)
		return
	}
	opts := &websocket.AcceptOptions{}
	if sp := up.Subprotocol(); sp != "" {
		opts.Subprotocols = []string{sp}
	}
	client, err := websocket.Accept(w, r, opts)
	if err != nil {
		up.Close(websocket.StatusGoingAway, "the client's handshake failed")
		log.Info("the client's WebSocket handshake failed", "err", err)
		return
	}
	limit := maxMessageFactor * p.o.MaxBodyBytes
	client.SetReadLimit(limit)
	up.SetReadLimit(limit)
	ctx, stop := context.WithCancel(context.WithoutCancel(r.Context()))
	defer stop()
	rl := &relay{p: p, ctx: ctx, cancel: stop, path: r.URL.Path, header: r.Header, cred: cred, log: log, client: client, up: up}
	rl.touch()
	p.m.requests.WithLabelValues(kindResponses, "websocket_relayed").Inc()
	log.Debug("relaying a Responses WebSocket")
	idle := rl.watchIdle()
	defer idle.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		rl.fromUpstream()
	}()
	rl.fromClient()
	<-done
}

// websocketProtocols are the subprotocols the client's upgrade asks for.
func websocketProtocols(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func (rl *relay) touch() { rl.active.Store(time.Now().UnixNano()) }

// watchIdle closes both connections (1001) once nothing moved for the
// idle timeout.
func (rl *relay) watchIdle() *time.Timer {
	idle := rl.p.o.WebSocketIdleTimeout
	var t *time.Timer
	var check func()
	check = func() {
		left := idle - time.Since(time.Unix(0, rl.active.Load()))
		if left > 0 {
			t.Reset(left)
			return
		}
		rl.log.Info("closing an idle WebSocket", "idle", idle)
		rl.closeBoth(websocket.StatusGoingAway, "idle for "+idle.String())
	}
	t = time.AfterFunc(idle, check)
	return t
}

// closeBoth closes both sides with code and reason.
func (rl *relay) closeBoth(code websocket.StatusCode, reason string) {
	go rl.up.Close(code, reason)
	rl.client.Close(code, reason)
	rl.cancel()
}

// fromClient reads the client's messages and sends each on, gated, until
// the client or the relay closes.
func (rl *relay) fromClient() {
	defer rl.up.Close(websocket.StatusNormalClosure, "")
	for {
		typ, rd, err := rl.client.Reader(rl.ctx)
		if err != nil {
			rl.closedBy("client", rl.client, rl.up, err)
			return
		}
		rl.touch()
		// A message must arrive whole in time, as an HTTP body must.
		stall := time.AfterFunc(rl.p.o.BodyReadTimeout, func() {
			rl.log.Info("closing a WebSocket whose message stalled", "limit", rl.p.o.BodyReadTimeout)
			rl.closeBoth(websocket.StatusPolicyViolation, "the message did not arrive within "+rl.p.o.BodyReadTimeout.String())
		})
		err = rl.message(typ, rd, stall)
		stall.Stop()
		if err != nil {
			return
		}
	}
}

// closedBy passes a close from one side to the other.
func (rl *relay) closedBy(side string, from, to *websocket.Conn, err error) {
	code := websocket.CloseStatus(err)
	switch {
	case code == -1 && errors.Is(err, websocket.ErrMessageTooBig):
		rl.log.Info("closing a WebSocket whose message is over the limit", "side", side, "limit_bytes", maxMessageFactor*rl.p.o.MaxBodyBytes)
		to.Close(websocket.StatusGoingAway, "the other side sent a message over the limit")
	case code == -1:
		rl.log.Debug("WebSocket ended", "side", side, "err", err)
		to.CloseNow()
	default:
		rl.log.Debug("WebSocket closed", "side", side, "code", int(code))
		to.Close(code, "closed by the "+side)
	}
	rl.cancel()
}

// message handles one client message: binary is refused (1003), a
// response.create is gated, anything else goes on as it came.
// stall is stopped once the message is read: gating it is the relay's
// own time.
func (rl *relay) message(typ websocket.MessageType, rd io.Reader, stall *time.Timer) error {
	if typ != websocket.MessageText {
		rl.log.Info("closing a WebSocket that sent a binary message; the Responses API speaks JSON text")
		rl.closeBoth(websocket.StatusUnsupportedData, "binary messages are not part of the Responses API; send JSON text")
		return errors.New("binary message")
	}
	p := rl.p
	select {
	case p.slots <- struct{}{}:
	default:
		p.m.requests.WithLabelValues(kindResponses, "busy").Inc()
		rl.untouched(nil)
		return rl.stream(nil, rd)
	}
	p.m.bodyReads.Inc()
	data, whole, err := rl.read(rd)
	if whole {
		stall.Stop()
	}
	<-p.slots
	p.m.bodyReads.Dec()
	if err != nil {
		rl.closedBy("client", rl.client, rl.up, err)
		return err
	}
	if !whole {
		p.m.requests.WithLabelValues(kindResponses, "oversized").Inc()
		rl.log.Info("WebSocket message over the body limit forwarded untouched", "limit_bytes", p.o.MaxBodyBytes)
		rl.untouched(nil)
		return rl.stream(data, rd)
	}
	// The top level only: a request is hundreds of kilobytes, and only
	// its type is needed to know whether it is one.
	raw, scanErr := scanConversation(data, "input")
	var event string
	if scanErr == nil {
		json.Unmarshal(raw.field("type"), &event)
	} else {
		var head struct {
			Type string `json:"type"`
		}
		json.Unmarshal(data, &head)
		event = head.Type
	}
	if event != "response.create" {
		// Not a request: the relay has no business with it.
		return rl.send(data)
	}
	return rl.create(data, raw, scanErr)
}

// read reads a message of at most MaxBodyBytes; whole is false when there
// was more. The buffer starts at the size of the connection's previous
// message, which arrived, so a request as large as the last one is read
// without growing; a smaller one is copied out, so that what the relay
// keeps holds no spare room.
func (rl *relay) read(rd io.Reader) (data []byte, whole bool, err error) {
	limit := rl.p.o.MaxBodyBytes
	buf := bytes.NewBuffer(make([]byte, 0, min(rl.lastSize, limit)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(rd, limit+1)); err != nil {
		return nil, false, err
	}
	data = buf.Bytes()
	if int64(len(data)) > limit {
		return data, false, nil
	}
	rl.lastSize = int64(len(data))
	if cap(data) > 2*len(data)+bytes.MinRead {
		data = bytes.Clone(data)
	}
	return data, true, nil
}

// stream sends a message the relay does not read on as it arrives.
func (rl *relay) stream(head []byte, rest io.Reader) error {
	w, err := rl.up.Writer(rl.ctx, websocket.MessageText)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, io.MultiReader(bytes.NewReader(head), rest)); err != nil {
		w.Close()
		rl.closedBy("client", rl.client, rl.up, err)
		return err
	}
	return w.Close()
}

func (rl *relay) send(data []byte) error {
	if err := rl.up.Write(rl.ctx, websocket.MessageText, data); err != nil {
		rl.log.Debug("writing to the upstream failed", "err", err)
		rl.client.Close(websocket.StatusGoingAway, "the upstream went away")
		rl.cancel()
		return err
	}
	rl.touch()
	return nil
}

// untouched queues a turn whose input the relay does not know: it breaks
// the chain the relay follows, and its request goes on as it came.
func (rl *relay) untouched(x *exchange) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.pending = append(rl.pending, &wsTurn{x: x})
	rl.last = nil
}

// create gates one response.create. A request chained on the previous
// response (previous_response_id) is read as the whole conversation: the
// previous request's whole input, that response's output and the new
// items. It goes on byte for byte, chained, while what the gate makes of
// it extends what the upstream already holds; otherwise it goes whole,
// unchained.
//
// raw is data scanned, or scanErr why it does not scan.
func (rl *relay) create(data []byte, raw *rawRequest, scanErr error) error {
	p := rl.p
	x := p.newExchange(kindResponses, rl.path, rl.header, rl.cred)
	x.log = x.log.With("transport", "websocket")
	var err error
	if scanErr != nil {
		x.prepare(rl.ctx, data) // counts it unparsed, and logs why
		p.m.requests.WithLabelValues(kindResponses, x.action).Inc()
		rl.untouched(nil)
		return rl.send(data)
	}
	delta := items(raw)
	prev := bytes.TrimSpace(raw.field("previous_response_id"))
	chained := len(prev) > 0 && string(prev) != "null"
	rl.mu.Lock()
	last := rl.last
	busy := len(rl.pending) > 0
	rl.mu.Unlock()
	var prevID string
	if chained {
		json.Unmarshal(prev, &prevID)
	}
	if chained && (last == nil || last.id != prevID || busy) {
		// Chained on a response the relay did not follow: the upstream
		// holds a history the relay cannot see, as over HTTP.
		x.prepare(rl.ctx, data)
		p.m.requests.WithLabelValues(kindResponses, x.action).Inc()
		rl.untouched(nil)
		return rl.send(data)
	}
	whole, full, stored := data, delta, [][]byte(nil)
	if chained {
		full = concat(last.client, delta)
		stored = concat(last.stored, delta)
		if whole, err = unchain(data, raw, full); err != nil {
			x.log.Warn("a chained request could not be read whole; forwarded untouched", "err", err)
			p.m.requests.WithLabelValues(kindResponses, actionUnparsed).Inc()
			rl.untouched(nil)
			return rl.send(data)
		}
	}
	x.began = time.Now()
	x.prepare(rl.ctx, whole)
	p.m.requests.WithLabelValues(kindResponses, x.action).Inc()
	turn := &wsTurn{x: x, client: full}
	out := data
	switch {
	case chained && extends(x.out, stored):
		turn.sent = stored
	case !chained && bytes.Equal(x.out, whole):
		turn.sent = full
	default:
		out = x.out
		sent, err := scanConversation(out, "input")
		if err != nil {
			turn.client = nil // the relay loses track; the request still goes
		} else {
			turn.sent = items(sent)
		}
		x.log.Debug("sent whole over the WebSocket", "chained_by_client", chained, "action", x.action)
	}
	p.m.addedTime.WithLabelValues(kindResponses).Observe(time.Since(x.began).Seconds())
	rl.mu.Lock()
	rl.pending = append(rl.pending, turn)
	rl.last = nil
	rl.mu.Unlock()
	return rl.send(out)
}

// items are the raw bytes of each item of a scanned request's input.
func items(r *rawRequest) [][]byte {
	out := make([][]byte, len(r.msgs))
	for i := range r.msgs {
		out[i] = r.msg(i)
	}
	return out
}

func concat(a, b [][]byte) [][]byte {
	out := make([][]byte, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

// extends reports whether body's input is, item for item and byte for
// byte, what the upstream holds plus nothing else: then the chained
// request the client sent says the same.
func extends(body []byte, stored [][]byte) bool {
	r, err := scanConversation(body, "input")
	if err != nil || len(r.msgs) != len(stored) {
		return false
	}
	for i := range stored {
		if !bytes.Equal(r.msg(i), stored[i]) {
			return false
		}
	}
	return true
}

// unchain writes a chained request whole: its input replaced by full and
// previous_response_id taken out; every other byte as it came.
func unchain(body []byte, r *rawRequest, full [][]byte) ([]byte, error) {
	id := r.fields["previous_response_id"]
	from, to, err := memberSpan(body, id)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(body) + sizeOf(full))
	write := func(start, end int) {
		// body[start:end] with the input array replaced.
		a := r.array
		if a.start >= start && a.end <= end {
			b.Write(body[start:a.start])
			b.WriteByte('[')
			for i, it := range full {
				if i > 0 {
					b.WriteByte(',')
				}
				b.Write(it)
			}
			b.WriteByte(']')
			b.Write(body[a.end:end])
			return
		}
		b.Write(body[start:end])
	}
	write(0, from)
	write(to, len(body))
	return b.Bytes(), nil
}

func sizeOf(items [][]byte) int {
	n := 0
	for _, it := range items {
		n += len(it) + 1
	}
	return n
}

// memberSpan is the span of the object member whose value is at v, with
// the comma that separates it from a neighbour, so that cutting it leaves
// valid JSON.
func memberSpan(body []byte, v span) (from, to int, err error) {
	// Back from the value over the colon to the key's closing quote.
	i := v.start - 1
	for i >= 0 && isSpace(body[i]) {
		i--
	}
	if i < 0 || body[i] != ':' {
		return 0, 0, errors.New("no key before previous_response_id's value")
	}
	i--
	for i >= 0 && isSpace(body[i]) {
		i--
	}
	if i < 0 || body[i] != '"' {
		return 0, 0, errors.New("no key before previous_response_id's value")
	}
	for i--; i >= 0; i-- {
		if body[i] == '"' && !escaped(body, i) {
			break
		}
	}
	if i < 0 {
		return 0, 0, errors.New("unterminated key")
	}
	from, to = i, v.end
	// A following comma goes with the member; else a preceding one.
	j := skipSpace(body, to)
	if j < len(body) && body[j] == ',' {
		return from, skipSpace(body, j+1), nil
	}
	k := from - 1
	for k >= 0 && isSpace(body[k]) {
		k--
	}
	if k >= 0 && body[k] == ',' {
		return k, to, nil
	}
	return from, to, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// escaped reports whether the quote at b[i] is escaped.
func escaped(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// fromUpstream sends the upstream's messages to the client as they
// arrive, following each response's output items and end, and retries a
// request the upstream refused as too long once, compacted.
func (rl *relay) fromUpstream() {
	defer rl.client.Close(websocket.StatusNormalClosure, "")
	for {
		typ, data, err := rl.up.Read(rl.ctx)
		if err != nil {
			rl.closedBy("upstream", rl.up, rl.client, err)
			return
		}
		rl.touch()
		if typ == websocket.MessageText && rl.event(data) {
			continue // replaced by a retry
		}
		wctx, cancel := context.WithTimeout(rl.ctx, rl.p.o.BodyReadTimeout)
		err = rl.client.Write(wctx, typ, data)
		cancel()
		if err != nil {
			rl.log.Debug("writing to the client failed", "err", err)
			rl.up.Close(websocket.StatusGoingAway, "the client went away")
			rl.cancel()
			return
		}
	}
}

// wsEvent is what the relay reads of an upstream event.
type wsEvent struct {
	Type     string          `json:"type"`
	Item     json.RawMessage `json:"item"`
	Response struct {
		ID string `json:"id"`
	} `json:"response"`
}

// event follows one upstream event; it reports true when the event is an
// overflow that a compacted retry replaces, and is not for the client.
func (rl *relay) event(data []byte) (replaced bool) {
	var ev wsEvent
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	rl.mu.Lock()
	var turn *wsTurn
	if len(rl.pending) > 0 {
		turn = rl.pending[0]
	}
	rl.mu.Unlock()
	if turn == nil {
		return false
	}
	switch ev.Type {
	case "response.output_item.done":
		if len(ev.Item) > 0 {
			turn.outputs = append(turn.outputs, bytes.Clone(ev.Item))
		}
	case "response.completed":
		rl.mu.Lock()
		rl.pending = rl.pending[1:]
		if turn.client != nil && turn.sent != nil && ev.Response.ID != "" && len(rl.pending) == 0 {
			rl.last = &wsHistory{id: ev.Response.ID, client: concat(turn.client, turn.outputs), stored: concat(turn.sent, turn.outputs)}
		}
		rl.mu.Unlock()
	case "response.failed", "response.incomplete", "error":
		if ev.Type != "response.incomplete" && rl.retry(turn, data) {
			return true
		}
		rl.mu.Lock()
		rl.pending = rl.pending[1:]
		rl.last = nil
		rl.mu.Unlock()
	}
	return false
}

// retry compacts a turn the upstream refused as too long and sends it
// again, once.
func (rl *relay) retry(turn *wsTurn, data []byte) bool {
	x := turn.x
	if x == nil || turn.retried {
		return false
	}
	res := overflow.Classify(http.StatusBadRequest, data)
	if !res.Overflow {
		return false
	}
	turn.retried = true
	again, ok := x.recoverOverflow(rl.ctx, http.StatusBadRequest, data, res)
	if !ok {
		rl.p.m.overflows.WithLabelValues("passed").Inc()
		return false
	}
	rl.p.m.overflows.WithLabelValues("retried").Inc()
	turn.outputs = nil
	if sent, err := scanConversation(again, "input"); err == nil && turn.client != nil {
		turn.sent = items(sent)
	} else {
		turn.client, turn.sent = nil, nil
	}
	if err := rl.send(again); err != nil {
		return false
	}
	x.log.Info("retried over the WebSocket after an overflow", "bytes", len(again))
	return true
}

// serveWebSocket serves a Responses WebSocket as Options.WebSockets says.
func (p *Proxy) serveWebSocket(w http.ResponseWriter, r *http.Request) bool {
	if !isResponsesWebSocket(r) {
		return false
	}
	switch p.o.WebSockets {
	case WebSocketsRefuse:
		p.refuseWebSocket(w, r)
	case WebSocketsForward:
		return false // forwarded as every other request, counted "websocket"
	default:
		p.relayWebSocket(w, r)
	}
	return true
}

// checkWebSockets checks and defaults Options.WebSockets.
func checkWebSockets(o *Options) error {
	switch o.WebSockets {
	case "":
		o.WebSockets = WebSocketsRelay
	case WebSocketsRelay, WebSocketsRefuse, WebSocketsForward:
	default:
		return fmt.Errorf("proxy: websockets %q: want relay, refuse or forward (flag --websockets)", o.WebSockets)
	}
	if o.WebSocketIdleTimeout <= 0 {
		o.WebSocketIdleTimeout = DefaultWebSocketIdleTimeout
	}
	return nil
}
