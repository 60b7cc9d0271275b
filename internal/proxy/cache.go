package proxy

import (
	"bytes"
	"container/list"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/internal/cachestate"
)

// The miss reasons of the cache_misses_total metric.
const (
	missColdStart     = cachestate.ColdStart
	missTTLExpired    = cachestate.TTLExpired
	missCompaction    = cachestate.Compaction
	missPrefixChanged = cachestate.PrefixChanged
)

// DefaultMaxConversations bounds the conversations whose cache state the
// proxy keeps; the least recently seen is forgotten first.
const DefaultMaxConversations = 10_000

// maxUsageBody bounds how much of a whole JSON answer is held to read its
// usage; a larger answer passes untouched, its usage unread. An event
// stream is read a line at a time, each at most maxUsageLine.
const (
	maxUsageBody = 8 << 20
	maxUsageLine = 1 << 20
)

// caches is the state of each conversation's prompt cache as the proxy
// sees it: when its last request went out, the TTL its cache_control
// asks for, and what the provider's usage says was cached. It is scoped
// by tenant, bounded, and safe for concurrent use.
type caches struct {
	mu     sync.Mutex
	max    int
	now    func() time.Time
	ttl    time.Duration // when a request names none
	byKey  map[string]*list.Element
	lru    *list.List // of *convCache, most recent first
	misses *prometheus.CounterVec
}

// convCache is one conversation's state and running bill.
type convCache struct {
	Tenant string `json:"-"`
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	cachestate.Conversation
	// sentMessages counts the messages of the last request as it went
	// upstream: where its cache breakpoint was.
	sentMessages int
}

func newCaches(max int, ttl time.Duration, now func() time.Time, reg prometheus.Registerer) *caches {
	return &caches{max: max, ttl: ttl, now: now, byKey: map[string]*list.Element{}, lru: list.New(), misses: cachestate.NewMisses(reg)}
}

// turn is one request of a conversation on its way: what the cache state
// said when it began, and what its answer reports.
type turn struct {
	c      *caches
	tenant string
	conv   string
	kind   string
	model  string
	cachestate.Turn
	// cached and sentBefore are the prompt the previous answer left in
	// the cache, in tokens, and the messages of the request it answered,
	// when that cache is warm; sent counts this request's messages as
	// they go.
	cached, sentBefore, sent int
	// compacted is set when this request's prompt was rewritten by a new
	// compaction.
	compacted bool
	once      sync.Once
}

// ttlOneHour finds a cache_control that asks for the 1-hour TTL.
var ttlOneHour = regexp.MustCompile(`"ttl"\s*:\s*"1h"`)

// begin starts a request of the conversation conv of tenant, whose body
// is body: it reads the TTL the body asks for and whether the cache is
// cold.
func (c *caches) begin(tenant, conv, kind, model string, body []byte) *turn {
	ttl := c.ttl
	if ttlOneHour.Match(body) {
		ttl = cost.TTL1h
	}
	t := &turn{c: c, tenant: tenant, conv: conv, kind: kind, model: model}
	c.mu.Lock()
	defer c.mu.Unlock()
	var state cachestate.Conversation
	var sentBefore int
	if el := c.byKey[tenant+"\x00"+conv]; el != nil {
		state, sentBefore = el.Value.(*convCache).Conversation, el.Value.(*convCache).sentMessages
	}
	t.Turn = state.Begin(c.now(), ttl)
	if t.Known == "" {
		t.cached, t.sentBefore = state.CachedTokens, sentBefore
	}
	return t
}

// finish records the answer's usage u (nil when none was read).
func (t *turn) finish(u *cost.Request) {
	t.once.Do(func() { t.c.finish(t, u) })
}

func (c *caches) finish(t *turn, u *cost.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := t.tenant + "\x00" + t.conv
	el := c.byKey[key]
	if el == nil {
		el = c.lru.PushFront(&convCache{Tenant: t.tenant, ID: t.conv, Kind: t.kind, Conversation: cachestate.Conversation{Misses: map[string]int{}}})
		c.byKey[key] = el
		for c.lru.Len() > c.max {
			old := c.lru.Back()
			c.lru.Remove(old)
			oc := old.Value.(*convCache)
			delete(c.byKey, oc.Tenant+"\x00"+oc.ID)
		}
	} else {
		c.lru.MoveToFront(el)
	}
	cc := el.Value.(*convCache)
	var p cost.Prices
	if m, ok := catalog.Lookup(t.model); ok {
		p = m.Prices()
	}
	// OpenAI and Gemini cache a prompt by themselves.
	if u != nil {
		cc.sentMessages = t.sent
	}
	if reason := cc.Finish(t.Turn, t.model, p, u, t.kind != KindAnthropic, t.compacted); reason != "" {
		c.misses.WithLabelValues(reason).Inc()
	}
}

// report lists tenant's conversations, most recent first, or the one
// named id; nil when there is none.
func (c *caches) report(tenant, id string) []convCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []convCache
	for el := c.lru.Front(); el != nil; el = el.Next() {
		cc := el.Value.(*convCache)
		if cc.Tenant != tenant || id != "" && cc.ID != id {
			continue
		}
		out = append(out, convCache{Tenant: cc.Tenant, ID: cc.ID, Kind: cc.Kind, Conversation: cc.Clone()})
	}
	return out
}

// observe reads the usage of a successful answer to x as it passes to
// the client, and records it when the body ends or is closed.
func (x *exchange) observe(resp *http.Response) *http.Response {
	if x == nil || x.turn == nil || resp == nil || resp.StatusCode >= 300 || resp.Body == nil {
		return resp
	}
	x.turn.compacted = x.action == actionCompacted
	x.turn.sent = x.outMessages()
	stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	if resp.Header.Get("Content-Encoding") != "" {
		// Not read: a compressed answer passes as it came.
		x.turn.finish(nil)
		return resp
	}
	resp.Body = &usageTap{ReadCloser: resp.Body, t: x.turn, stream: stream}
	return resp
}

// usageTap passes an answer's bytes through and reads its usage: from
// each data line of an event stream, or from the whole of a JSON body.
type usageTap struct {
	io.ReadCloser
	t      *turn
	stream bool
	buf    bytes.Buffer
	over   bool
	usage  wireUsage
	seen   bool
}

func (u *usageTap) Read(p []byte) (int, error) {
	n, err := u.ReadCloser.Read(p)
	u.feed(p[:n])
	if err != nil {
		u.done()
	}
	return n, err
}

func (u *usageTap) Close() error {
	u.done()
	return u.ReadCloser.Close()
}

func (u *usageTap) feed(b []byte) {
	if u.over {
		if !u.stream {
			return
		}
		// The rest of an over-long line is skipped.
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return
		}
		u.over, b = false, b[i+1:]
	}
	if !u.stream {
		if u.buf.Len()+len(b) > maxUsageBody {
			u.over = true
			u.buf = bytes.Buffer{}
			return
		}
		u.buf.Write(b)
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		end := i
		if i < 0 {
			end = len(b)
		}
		if u.buf.Len()+end > maxUsageLine {
			// The line is skipped, here to its end or past this read.
			u.buf.Reset()
			if i < 0 {
				u.over = true
				return
			}
			b = b[i+1:]
			continue
		}
		u.buf.Write(b[:end])
		if i < 0 {
			return
		}
		u.line(u.buf.Bytes())
		u.buf.Reset()
		b = b[i+1:]
	}
}

func (u *usageTap) line(l []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimSpace(l), []byte("data:"))
	if ok {
		u.event(bytes.TrimSpace(data))
	}
}

func (u *usageTap) event(b []byte) {
	var ev wireEvent
	if json.Unmarshal(b, &ev) != nil {
		return
	}
	for _, w := range []*wireUsage{ev.Usage, ev.Message.usage(), ev.Response.usage(), ev.UsageMetadata.usage()} {
		if w != nil {
			u.usage.merge(w)
			u.seen = true
		}
	}
}

func (u *usageTap) done() {
	if u.stream {
		if u.buf.Len() > 0 && !u.over {
			u.line(u.buf.Bytes())
		}
	} else if !u.over {
		b := bytes.TrimSpace(u.buf.Bytes())
		if len(b) > 0 && b[0] == '[' {
			// Gemini's stream as one JSON array.
			var evs []json.RawMessage
			if json.Unmarshal(b, &evs) == nil {
				for _, e := range evs {
					u.event(e)
				}
			}
		} else {
			u.event(b)
		}
	}
	u.buf = bytes.Buffer{}
	if !u.seen {
		u.t.finish(nil)
		return
	}
	r := u.usage.request(u.t.kind)
	u.t.finish(&r)
}

// wireUsage is the usage of every API the proxy speaks, in one shape:
// Anthropic's input, cache reads and writes; Chat Completions' prompt and
// completion with cached details; Responses' input with cached details;
// Gemini's usageMetadata, mapped onto these.
type wireUsage struct {
	InputTokens   int `json:"input_tokens"`
	OutputTokens  int `json:"output_tokens"`
	CacheRead     int `json:"cache_read_input_tokens"`
	CacheWrite    int `json:"cache_creation_input_tokens"`
	CacheCreation *struct {
		Write5m int `json:"ephemeral_5m_input_tokens"`
		Write1h int `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	PromptDetails    *struct {
		Cached int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputDetails *struct {
		Cached int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

type usageHolder struct {
	Usage *wireUsage `json:"usage"`
}

func (h *usageHolder) usage() *wireUsage {
	if h == nil {
		return nil
	}
	return h.Usage
}

type geminiUsage struct {
	Prompt     int `json:"promptTokenCount"`
	Cached     int `json:"cachedContentTokenCount"`
	Candidates int `json:"candidatesTokenCount"`
}

func (g *geminiUsage) usage() *wireUsage {
	if g == nil {
		return nil
	}
	w := &wireUsage{PromptTokens: g.Prompt, CompletionTokens: g.Candidates}
	w.PromptDetails = &struct {
		Cached int `json:"cached_tokens"`
	}{g.Cached}
	return w
}

// wireEvent is an answer or one event of a stream: the usage sits at the
// top (Anthropic's message_delta, Chat Completions, an Anthropic
// message), in message_start's message, in a Responses event's response,
// or in Gemini's usageMetadata.
type wireEvent struct {
	Usage         *wireUsage   `json:"usage"`
	Message       *usageHolder `json:"message"`
	Response      *usageHolder `json:"response"`
	UsageMetadata *geminiUsage `json:"usageMetadata"`
}

// merge takes the larger of each count: a stream repeats or grows them.
func (w *wireUsage) merge(o *wireUsage) {
	w.InputTokens = max(w.InputTokens, o.InputTokens)
	w.OutputTokens = max(w.OutputTokens, o.OutputTokens)
	w.CacheRead = max(w.CacheRead, o.CacheRead)
	w.CacheWrite = max(w.CacheWrite, o.CacheWrite)
	if o.CacheCreation != nil {
		w.CacheCreation = o.CacheCreation
	}
	w.PromptTokens = max(w.PromptTokens, o.PromptTokens)
	w.CompletionTokens = max(w.CompletionTokens, o.CompletionTokens)
	if o.PromptDetails != nil && (w.PromptDetails == nil || o.PromptDetails.Cached > w.PromptDetails.Cached) {
		w.PromptDetails = o.PromptDetails
	}
	if o.InputDetails != nil && (w.InputDetails == nil || o.InputDetails.Cached > w.InputDetails.Cached) {
		w.InputDetails = o.InputDetails
	}
}

// request is the usage as billed, by the API's way of counting: for
// Anthropic the input excludes the cache; for the others the prompt
// includes what was read from it.
func (w wireUsage) request(kind string) cost.Request {
	if kind == KindAnthropic {
		r := cost.Request{Input: w.InputTokens, CacheRead: w.CacheRead, CacheWrite5m: w.CacheWrite, Output: w.OutputTokens}
		if c := w.CacheCreation; c != nil && c.Write5m+c.Write1h > 0 {
			r.CacheWrite5m, r.CacheWrite1h = c.Write5m+max(0, w.CacheWrite-c.Write5m-c.Write1h), c.Write1h
		}
		return r
	}
	prompt, out, cached := w.PromptTokens, w.CompletionTokens, 0
	if w.PromptDetails != nil {
		cached = w.PromptDetails.Cached
	}
	if prompt == 0 {
		// Responses counts input and output.
		prompt, out = w.InputTokens, w.OutputTokens
		if w.InputDetails != nil {
			cached = w.InputDetails.Cached
		}
	}
	cached = min(cached, prompt)
	return cost.Request{Input: prompt - cached, CacheRead: cached, Output: out}
}

// serveConversations answers the report of the asking tenant's
// conversations: GET conversations lists them, conversations/<id> names
// one.
func (p *Proxy) serveConversations(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "compact-host proxy: the conversations report answers GET", http.StatusMethodNotAllowed)
		return
	}
	// The metrics token is the admin's, not a tenant's: the tenant is the
	// request's other credentials.
	rc := r.Clone(r.Context())
	if p.o.MetricsToken != "" {
		rc.Header.Del("Authorization")
	}
	list := p.caches.report(string(p.credentialsOf(rc).tenant), id)
	w.Header().Set("Content-Type", "application/json")
	if id != "" {
		if len(list) == 0 {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]string{"error": "no conversation " + id + " of this credential"})
			return
		}
		json.NewEncoder(w).Encode(list[0])
		return
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].LastRequest.After(list[j].LastRequest) })
	if list == nil {
		list = []convCache{}
	}
	json.NewEncoder(w).Encode(map[string]any{"conversations": list})
}
