package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/redact"
	"github.com/compact-host/compact-host/internal/tenant"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// API kinds. KindOpenAI covers both of OpenAI's wire APIs, Chat
// Completions and Responses; KindGemini is the Gemini API's
// generateContent and streamGenerateContent.
const (
	KindAnthropic = "anthropic"
	KindOpenAI    = "openai"
	KindGemini    = "gemini"
)

// kindResponses is the kind of an OpenAI Responses request, in metrics
// and logs: its conversation is "input", not "messages".
const kindResponses = "responses"

// AdminPrefix is where the proxy serves its own endpoints. No provider API
// has paths under it, so it cannot shadow one.
const AdminPrefix = "/_compact-host/"

// Defaults for the zero values of Options.
const (
	DefaultMaxBodyBytes = 32 << 20
	DefaultLockWait     = 3 * time.Minute
	DefaultLockLease    = 5 * time.Minute
	DefaultStoreTimeout = 5 * time.Second
	// A body must arrive within DefaultBodyReadTimeout, with no pause
	// longer than DefaultBodyIdleTimeout; 32 MiB at 2 Mbit/s takes 2 min.
	DefaultBodyReadTimeout = 2 * time.Minute
	DefaultBodyIdleTimeout = 30 * time.Second
	// DefaultMaxBodyReads bounds the bodies read into memory at once:
	// with DefaultMaxBodyBytes, 1 GiB at most.
	DefaultMaxBodyReads = 32
	// DefaultBreakerFailures consecutive failed summary calls of a tenant
	// skip its model-backed summaries for DefaultBreakerCooldown, unless
	// Config.BreakerFailures and Config.BreakerCooldown say otherwise.
	DefaultBreakerFailures = 3
	DefaultBreakerCooldown = 5 * time.Minute
)

// Options configure a Proxy. The zero value of every field but Upstream
// means its default.
type Options struct {
	// Upstream is the provider's address, as the agent would have used it:
	// https://api.anthropic.com, https://api.openai.com, or
	// http://localhost:11434 for Ollama. A request's path is appended.
	Upstream *url.URL
	// Kind is KindAnthropic, KindOpenAI or KindGemini to gate only that
	// provider's requests; "" detects it per request from the path
	// (/v1/messages, /chat/completions, /responses,
	// /models/<model>:generateContent).
	Kind string
	// Config is what every request's engine starts from. Its Model and
	// ContextWindow, when set, size the budget instead of the request's
	// model. Tokenizer "" means "chars": the cheap bound that lets most
	// requests skip decoding holds only for chars/4.
	Config host.Config
	// Registry resolves strategy plugins; nil leaves only the strategies
	// of EngineOptions.
	Registry *plugin.Registry
	// EngineOptions are given to every request's engine after the
	// proxy's own, for strategies linked into the program.
	EngineOptions []host.Option
	// CompactionModel is the model summaries are asked of. "" picks the
	// provider's cheaper model where the catalog knows the request's
	// model and a cheaper one (claude-haiku-4-5, gpt-4.1-mini,
	// gemini-2.5-flash-lite), else the request's own model.
	CompactionModel string
	// Offline makes strategies summarize without calling a model.
	Offline bool
	// Store keeps compactions; default a new store.Memory.
	Store store.Store
	// MaxBodyBytes is the largest body the proxy reads to rewrite; a
	// larger one is forwarded untouched, streamed as it arrives.
	// Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// LockWait bounds how long a request waits for another request's
	// compaction of the same conversation. Default DefaultLockWait.
	LockWait time.Duration
	// LockLease is how long a compaction holds its conversation's lock at
	// most. Default DefaultLockLease.
	LockLease time.Duration
	// StoreTimeout bounds each store call. Default DefaultStoreTimeout.
	StoreTimeout time.Duration
	// Logger receives structured logs: conversation IDs, sizes, actions,
	// never content or credentials. Default slog.Default().
	Logger *slog.Logger
	// Transport sends requests upstream. Default: a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper

	// TenantKeyer derives each request's tenant from its credential
	// (x-api-key, Authorization, x-goog-api-key, api-key or ?key=).
	// Everything the proxy stores or locks is scoped by tenant. Replicas
	// sharing a store need one secret (tenant.LoadKeyer); default a
	// random one, good for this process only.
	TenantKeyer *tenant.Keyer
	// ShareCompactions puts every credential in one tenant: a client gets
	// summaries made with another client's key, and can tell from the
	// timing whether anyone sent a given prefix. Only for deployments
	// whose clients trust each other.
	ShareCompactions bool
	// WebSockets is what a Responses API WebSocket (GET /v1/responses
	// with an upgrade) gets: WebSocketsRelay (the default) gates each of
	// its requests, WebSocketsRefuse answers 426 so that the agent falls
	// back to HTTP, WebSocketsForward forwards it uncompacted.
	WebSockets string
	// WebSocketIdleTimeout closes a relayed WebSocket on which nothing
	// moved for so long. Default DefaultWebSocketIdleTimeout.
	WebSocketIdleTimeout time.Duration
	// MetricsToken, when set, is the bearer token the admin endpoints
	// (metrics) ask for; healthz stays open.
	MetricsToken string

	// BodyReadTimeout bounds reading a body to rewrite, and
	// BodyIdleTimeout any pause in a body. Defaults
	// DefaultBodyReadTimeout and DefaultBodyIdleTimeout.
	BodyReadTimeout time.Duration
	BodyIdleTimeout time.Duration
	// MaxBodyReads bounds the bodies read into memory at once; a request
	// beyond it is forwarded untouched, streamed as it arrives. Default
	// DefaultMaxBodyReads.
	MaxBodyReads int

	// ProviderTimeout bounds each attempt of a summary call, and
	// ProviderMaxRetries is how often a failed one is retried (negative:
	// never), as in provider.Config; zero values mean its defaults.
	ProviderTimeout    time.Duration
	ProviderMaxRetries int

	// DiscardOriginals stops keeping what compactions fold. By default
	// the original messages of every folded span are kept in Store's
	// sessions (within its size limit and expiry), so that the markers
	// of the proxy's summaries can be recalled: through MCP, or by
	// `compact-host mcp --conversation`. On the default store (Store
	// nil), which no other process reads, they are kept only with MCP.
	DiscardOriginals bool
	// MCP serves the recall tools at MCPPath, over the originals of the
	// tenant of each request's credential. Set Config.RecallHint with
	// it, so that summaries tell the model the tools exist.
	MCP bool

	// MaxConversations bounds the conversations whose prompt-cache state
	// is kept. Default DefaultMaxConversations.
	MaxConversations int
	// Now is the clock of the cache state (when a request went out, and
	// so whether its cache expired); default time.Now.
	Now func() time.Time
}

// Proxy forwards an agent's provider requests to the upstream, compacting
// the conversation of messages requests when the gate says so.
type Proxy struct {
	o        Options
	log      *slog.Logger
	logs     *redact.LogHandler
	keyer    *tenant.Keyer
	breakers *tenant.Breakers
	// slots holds a token per body being read into memory.
	slots   chan struct{}
	m       *metrics
	rp      *httputil.ReverseProxy
	metrics http.Handler
	warned  sync.Map // warnings given once, by subject
	nWarned atomic.Int64
	caches  *caches
	mcp     http.Handler
}

// maxWarned bounds the subjects remembered by warnOnce: subjects come
// from clients (model names), and a client must not grow the map.
const maxWarned = 1000

// warnOnce logs a warning the first time for subject.
func (p *Proxy) warnOnce(subject, msg string, args ...any) {
	if _, seen := p.warned.Load(subject); seen {
		return
	}
	if p.nWarned.Add(1) <= maxWarned {
		p.warned.Store(subject, true)
	}
	p.log.Warn(msg, args...)
}

// New checks o and builds a Proxy.
func New(o Options) (*Proxy, error) {
	if o.Upstream == nil || o.Upstream.Scheme == "" || o.Upstream.Host == "" {
		return nil, errors.New("proxy: the upstream must be an absolute URL such as https://api.anthropic.com (flag --upstream)")
	}
	switch o.Kind {
	case "", KindAnthropic, KindOpenAI, KindGemini:
	default:
		return nil, fmt.Errorf("proxy: kind %q: want anthropic, openai, gemini or empty to detect it (flag --kind)", o.Kind)
	}
	if err := checkWebSockets(&o); err != nil {
		return nil, err
	}
	if o.Config.Tokenizer == "" {
		o.Config.Tokenizer = "chars"
	}
	if o.Store == nil {
		o.Store = store.NewMemory()
		// Originals in this process's memory serve its own MCP
		// endpoint only: without it they would only grow.
		o.DiscardOriginals = o.DiscardOriginals || !o.MCP
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.LockWait <= 0 {
		o.LockWait = DefaultLockWait
	}
	if o.LockLease <= 0 {
		o.LockLease = DefaultLockLease
	}
	if o.StoreTimeout <= 0 {
		o.StoreTimeout = DefaultStoreTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.BodyReadTimeout <= 0 {
		o.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if o.BodyIdleTimeout <= 0 {
		o.BodyIdleTimeout = DefaultBodyIdleTimeout
	}
	if o.MaxBodyReads <= 0 {
		o.MaxBodyReads = DefaultMaxBodyReads
	}
	if o.MaxConversations <= 0 {
		o.MaxConversations = DefaultMaxConversations
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TenantKeyer == nil {
		o.TenantKeyer = tenant.NewRandomKeyer()
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	// A config that cannot make an engine fails now, not on every request.
	probe := o.Config
	if probe.Model == "" && probe.ContextWindow == 0 {
		probe.ContextWindow = 200000
	}
	if _, err := host.New(probe); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	// Every line the proxy and its engines log passes one redaction.
	logs := redact.Handler(o.Logger.Handler())
	failures, cooldown := o.Config.BreakerFailures, o.Config.BreakerCooldown
	if failures <= 0 {
		failures = DefaultBreakerFailures
	}
	if cooldown <= 0 {
		cooldown = DefaultBreakerCooldown
	}
	p := &Proxy{o: o, log: slog.New(logs), logs: logs, m: newMetrics(), keyer: o.TenantKeyer,
		breakers: tenant.NewBreakers(failures, cooldown), slots: make(chan struct{}, o.MaxBodyReads)}
	ttl := o.Config.CacheTTL
	if ttl <= 0 {
		ttl = cost.TTL5m
	}
	p.caches = newCaches(o.MaxConversations, ttl, o.Now, p.m.reg)
	p.metrics = promhttp.HandlerFor(p.m.reg, promhttp.HandlerOpts{})
	up := o.Upstream
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			// SetURL sets Host to the upstream's; the forwarding headers
			// Rewrite strips stay stripped: the upstream sees the agent's
			// request, not a proxy's.
			pr.Out.Host = up.Host
		},
		Transport:     &upstreamTransport{p: p, base: o.Transport},
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(logs, slog.LevelWarn),
		ErrorHandler:  p.upstreamError,
	}
	if o.MCP {
		var err error
		if p.mcp, err = p.newMCPHandler(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Logger is the proxy's logger: every line it writes passes the proxy's
// redaction of credentials. A server in front of the proxy logs through it.
func (p *Proxy) Logger() *slog.Logger { return p.log }

// Close releases the store.
func (p *Proxy) Close() error { return p.o.Store.Close() }

// ServeHTTP forwards r upstream. Messages requests go through the gate
// first; every other request passes untouched.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.mcp != nil && r.URL.Path == MCPPath {
		p.mcp.ServeHTTP(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, AdminPrefix) {
		p.admin(w, r)
		return
	}
	if err := checkPath(r.URL); err != nil {
		kind := p.errorKind(r)
		p.m.requests.WithLabelValues(kind, "refused").Inc()
		p.writeError(w, kind, http.StatusBadRequest, "invalid_request_error", "compact-host proxy: "+err.Error(), nil)
		return
	}
	if p.serveWebSocket(w, r) {
		return
	}
	var body *deadlineBody
	if r.Body != nil && r.Body != http.NoBody {
		body = newDeadlineBody(w, r.Body, p.o.BodyIdleTimeout)
		r.Body = body
		defer body.finish()
	}
	kind := p.messagesKind(r)
	if kind == "" {
		p.m.requests.WithLabelValues(p.errorKind(r), p.passthroughAction(r)).Inc()
		p.rp.ServeHTTP(w, r)
		return
	}
	cred := p.credentialsOf(r)
	x := p.newExchange(kind, r.URL.Path, r.Header, cred)
	if kind == KindGemini {
		x.geminiKey = r.URL.Query().Get("key")
	}
	select {
	case p.slots <- struct{}{}:
	default:
		// Reading one more body into memory could exhaust it; the request
		// goes on as it would without the proxy. Debug level: under a
		// flood of such requests the metric says it, one line each would not.
		p.m.requests.WithLabelValues(kind, "busy").Inc()
		x.log.Debug("too many bodies being read; forwarded untouched", "max_body_reads", p.o.MaxBodyReads)
		p.rp.ServeHTTP(w, r)
		return
	}
	p.m.bodyReads.Inc()
	if body != nil {
		body.until = time.Now().Add(p.o.BodyReadTimeout)
	}
	data, whole, err := readBounded(r.Body, r.ContentLength, p.o.MaxBodyBytes)
	if body != nil {
		body.until = time.Time{} // from here, only pauses are bounded
	}
	<-p.slots
	p.m.bodyReads.Dec()
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errBodyTimeout) {
			status = http.StatusRequestTimeout
			p.m.requests.WithLabelValues(kind, "body_timeout").Inc()
		}
		x.log.Warn("reading the request body failed", "err", err)
		p.writeError(w, kind, status, "invalid_request_error", "compact-host proxy: reading the request body: "+err.Error(), cred.known)
		return
	}
	if !whole {
		// Over the limit: what was read and the rest go on as they are.
		p.m.requests.WithLabelValues(kind, "oversized").Inc()
		x.log.Info("request over the body limit forwarded untouched", "limit_bytes", p.o.MaxBodyBytes)
		r.Body = readCloser{io.MultiReader(bytes.NewReader(data), r.Body), r.Body}
		p.rp.ServeHTTP(w, r)
		return
	}
	// Added latency is the proxy's own work, from a whole body to the
	// upstream: the upload is the agent's, proxy or not.
	x.began = time.Now()
	plain := data
	enc := contentEncoding(r.Header)
	if enc != "" {
		if plain, err = decodeBody(enc, data, p.o.MaxBodyBytes); err != nil {
			p.m.requests.WithLabelValues(kind, "undecoded").Inc()
			x.log.Info("a body the proxy could not decode is forwarded untouched", "content_encoding", enc, "err", err)
			r.Body = io.NopCloser(bytes.NewReader(data))
			p.rp.ServeHTTP(w, r)
			return
		}
	}
	x.prepare(r.Context(), plain)
	p.m.requests.WithLabelValues(kind, x.action).Inc()
	out := x.out
	if enc != "" {
		if bytes.Equal(out, plain) {
			out = data // unchanged: the bytes the agent sent
		} else {
			// Rewritten: sent plain, which every API takes.
			r.Header.Del("Content-Encoding")
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(out))
	r.ContentLength = int64(len(out))
	r.Header.Del("Content-Length")
	r.TransferEncoding = nil
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out)), nil }
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x)))
}

// checkPath refuses a path with dot segments, plain or percent-encoded:
// the upstream, or a server in front of it, may resolve them to another
// endpoint than the one the proxy judged the request by.
func checkPath(u *url.URL) error {
	for _, p := range []string{u.Path, u.RawPath} {
		for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
			if seg == "." || seg == ".." || strings.EqualFold(seg, "%2e") || strings.EqualFold(seg, "%2e%2e") ||
				strings.EqualFold(seg, ".%2e") || strings.EqualFold(seg, "%2e.") {
				return fmt.Errorf("the path %q has a dot segment (. or ..); send the path the API documents", u.EscapedPath())
			}
		}
	}
	return nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// messagesKind is the API kind of a messages request, or "" for any other
// request.
func (p *Proxy) messagesKind(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	if _, ok := geminiModelOf(path); ok && (p.o.Kind == "" || p.o.Kind == KindGemini) {
		return KindGemini
	}
	if p.o.Kind == KindGemini {
		return ""
	}
	switch {
	case strings.HasSuffix(path, anthropicSuffix) && p.o.Kind != KindOpenAI:
		return KindAnthropic
	case strings.HasSuffix(path, openAISuffix) && p.o.Kind != KindAnthropic:
		return KindOpenAI
	case strings.HasSuffix(path, responsesSuffix) && p.o.Kind != KindAnthropic:
		return kindResponses
	}
	return ""
}

// The endpoints whose requests carry a conversation.
const (
	anthropicSuffix = "/v1/messages"
	openAISuffix    = "/chat/completions"
	// responsesSuffix is the Responses API's; /responses/compact, the
	// provider's own compaction, passes through.
	responsesSuffix = "/responses"
)

// geminiModelOf is the model of a Gemini API conversation request's path,
// ".../models/<model>:generateContent" or ":streamGenerateContent"; ok is
// false for any other path (countTokens, embedContent, a model's
// metadata), which passes through.
func geminiModelOf(path string) (model string, ok bool) {
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return "", false
	}
	model, method, found := strings.Cut(path[i+len("/models/"):], ":")
	if !found || model == "" || strings.ContainsRune(model, '/') {
		return "", false
	}
	return model, method == "generateContent" || method == "streamGenerateContent"
}

// isResponsesWebSocket reports whether r opens a Responses API
// WebSocket (GET /v1/responses with an upgrade), the transport Codex
// prefers.
func isResponsesWebSocket(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), responsesSuffix) &&
		strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// refuseWebSocket answers a Responses WebSocket with 426 Upgrade
// Required: the proxy gates requests over HTTP, and Codex answers a 426
// by sending its turns over HTTP for the rest of the session.
func (p *Proxy) refuseWebSocket(w http.ResponseWriter, r *http.Request) {
	p.m.requests.WithLabelValues(kindResponses, "websocket_refused").Inc()
	p.warnOnce("responses websocket", "Responses API WebSockets are answered 426 so that the agent sends its requests over HTTP, where they are compacted; --websockets relay compacts them, forward forwards them uncompacted",
		"path", r.URL.Path)
	p.writeError(w, KindOpenAI, http.StatusUpgradeRequired, "invalid_request_error",
		"compact-host proxy: the Responses API WebSocket is not served here; send the request over HTTP (POST "+r.URL.Path+")", nil)
}

// passthroughAction names, for the requests metric, what a request that
// is not gated is: a Responses WebSocket carries a conversation
// uncompacted, and a user must hear of it.
func (p *Proxy) passthroughAction(r *http.Request) string {
	if isResponsesWebSocket(r) {
		p.warnOnce("responses websocket forwarded", "a Responses API WebSocket is forwarded uncompacted (--websockets forward)", "path", r.URL.Path)
		return "websocket"
	}
	return "passthrough"
}

func (p *Proxy) admin(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, AdminPrefix)
	if name != "healthz" && !p.adminAllowed(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="compact-host proxy"`)
		http.Error(w, "compact-host proxy: this endpoint needs the metrics token: Authorization: Bearer <token>", http.StatusUnauthorized)
		return
	}
	if id, ok := strings.CutPrefix(name, "conversations"); ok && (id == "" || id[0] == '/') {
		p.serveConversations(w, r, strings.TrimPrefix(id, "/"))
		return
	}
	switch name {
	case "metrics":
		p.metrics.ServeHTTP(w, r)
	case "healthz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	default:
		http.NotFound(w, r)
	}
}

// adminAllowed checks the metrics token, when one is set. Both sides are
// hashed first, so the comparison takes the same time whatever the
// length or content of a guess.
func (p *Proxy) adminAllowed(r *http.Request) bool {
	if p.o.MetricsToken == "" {
		return true
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") {
		return false
	}
	got, want := sha256.Sum256([]byte(strings.TrimSpace(token))), sha256.Sum256([]byte(p.o.MetricsToken))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}
