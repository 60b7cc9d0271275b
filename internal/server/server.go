package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/redact"
	"github.com/compact-host/compact-host/internal/suggest"
	"github.com/compact-host/compact-host/internal/tenant"
)

// Defaults of Options.
const (
	DefaultMaxRequestBytes = 64 << 20
	DefaultRequestTimeout  = 5 * time.Minute
	DefaultBodyTimeout     = 30 * time.Second
)

// Limits on what a request may override.
const (
	maxFocusBytes = 8 << 10
	maxNameBytes  = 256
)

// Options configure a Server. The zero value of each field means the
// default its comment names; Registry is required.
type Options struct {
	// Config is the engine configuration every request starts from; a
	// request's options override parts of it. An engine is built per
	// request from it, so no state (calibration) carries from one
	// request to the next, except each tenant's breaker of failed
	// summary calls (BreakerFailures, BreakerCooldown), which the server
	// keeps across its requests.
	Config host.Config
	// Registry supplies strategies and truncators for the server's life.
	// A watched registry makes a plugin dropped into its directory usable
	// without a restart. The server does not close it.
	Registry *plugin.Registry
	// Model writes summaries; nil runs every strategy offline.
	Model host.ModelClient
	// Logger receives one line per request at Info, failures at Warn and
	// Error. Nil discards.
	Logger *slog.Logger
	// Version is reported by /healthz.
	Version string
	// MaxRequestBytes bounds a request body; larger ones get 413.
	// Default 64 MiB.
	MaxRequestBytes int64
	// RequestTimeout bounds a request, its wait for a worker included.
	// Default 5 minutes; negative means no bound.
	RequestTimeout time.Duration
	// BodyTimeout bounds the arrival of a request body, from the end of
	// its headers; a body still arriving then gets 408. The body is read
	// before the request waits for a worker, so clients that send slowly
	// hold a connection, never a worker. Default 30 seconds; it is cut to
	// RequestTimeout when that is shorter.
	BodyTimeout time.Duration
	// Tokens, when any, are the bearer tokens every endpoint but
	// /healthz and /openapi.json requires. Each is a tenant: the
	// sessions one token makes are reached by it alone.
	Tokens []Token
	// Tenants derives each token's tenant ID, the scope of its sessions
	// in the store. Servers that share a store must share its secret.
	// Nil makes one of its own, good for this process's life only.
	Tenants *tenant.Keyer
	// Quota bounds what each tenant keeps in the store.
	Quota Quota
	// MaxConcurrent bounds the requests that work at once (compact, check,
	// truncate); others wait for a worker, within their timeout. Default
	// 2×GOMAXPROCS.
	MaxConcurrent int
	// Store keeps the sessions of /v1/sessions and the records of their
	// compactions; it must implement store.Sessions. Servers that share
	// a store (Redis) serve the same sessions. Nil keeps them in this
	// process's memory. The server does not close it.
	Store store.Store
	// Now is the clock that says whether a session's prompt cache has
	// expired since its last update (the cache-aware policy); default
	// time.Now.
	Now func() time.Time
}

// Server is the HTTP JSON API over the engine. It is safe for concurrent
// use; see the package documentation for the endpoints.
type Server struct {
	opts  Options
	log   *slog.Logger
	keyer *tenant.Keyer
	// tokens are the accepted tokens by their tenant.
	tokens map[tenant.ID]tokenEntry
	slots  chan struct{}
	routes map[string]route
	// sessionRoutes are the routes under /v1/sessions/, by method and
	// pattern ("GET /v1/sessions/{id}").
	sessionRoutes map[string]route
	store         store.Store
	sessions      store.Sessions
	// breakers hold each tenant's failed summary calls across its
	// requests.
	breakers *tenant.Breakers
	// secrets are the credentials the server knows, redacted from every
	// answer and log line; roots the directories of the server that
	// answers never name (public).
	secrets []string
	roots   []string
	// reg holds the metrics of GET /metrics; misses counts the sessions'
	// cache misses by reason.
	reg    *prometheus.Registry
	misses *prometheus.CounterVec
}

// route is an endpoint: its method, whether it needs a worker slot, and
// its handler.
type route struct {
	method string
	work   bool
	open   bool // no token needed
	handle func(w http.ResponseWriter, r *http.Request, body []byte) *apiError
}

// New checks the options and returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Registry == nil {
		return nil, errors.New("server: Options.Registry is required")
	}
	if _, err := host.New(opts.Config); err != nil {
		return nil, fmt.Errorf("server: engine config: %w", err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	switch {
	case opts.MaxRequestBytes < 0:
		return nil, fmt.Errorf("server: Options.MaxRequestBytes %d is negative", opts.MaxRequestBytes)
	case opts.BodyTimeout < 0:
		return nil, fmt.Errorf("server: Options.BodyTimeout %s is negative", opts.BodyTimeout)
	case opts.MaxConcurrent < 0:
		return nil, fmt.Errorf("server: Options.MaxConcurrent %d is negative", opts.MaxConcurrent)
	case opts.Quota.MaxSessions < 0 || opts.Quota.MaxBytes < 0:
		return nil, fmt.Errorf("server: Options.Quota %+v is negative", opts.Quota)
	case opts.Quota.MaxSessions > MaxTenantSessions:
		return nil, fmt.Errorf("server: Options.Quota.MaxSessions %d is over %d", opts.Quota.MaxSessions, MaxTenantSessions)
	}
	if opts.Quota.MaxSessions == 0 {
		opts.Quota.MaxSessions = DefaultTenantMaxSessions
	}
	if opts.Quota.MaxBytes == 0 {
		opts.Quota.MaxBytes = DefaultTenantMaxBytes
	}
	if opts.Tenants == nil {
		opts.Tenants = tenant.NewRandomKeyer()
	}
	tokens := map[tenant.ID]tokenEntry{}
	var secrets []string
	for i, t := range opts.Tokens {
		if strings.TrimSpace(t.Secret) != t.Secret || t.Secret == "" {
			return nil, fmt.Errorf("server: Options.Tokens[%d] (%q): a token cannot be empty nor have surrounding space", i, t.Name)
		}
		id := opts.Tenants.Of(t.Secret)
		if prev, dup := tokens[id]; dup {
			return nil, fmt.Errorf("server: Options.Tokens[%d] (%q) is the same token as %q", i, t.Name, prev.name)
		}
		tokens[id] = tokenEntry{sum: sha256.Sum256([]byte(t.Secret)), name: t.Name}
		secrets = append(secrets, t.Secret)
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.BodyTimeout == 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 2 * runtime.GOMAXPROCS(0)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// Engines and plugins log through it too: an upstream body they
	// quote loses its credentials on the way.
	opts.Logger = slog.New(redact.Handler(opts.Logger.Handler(), secrets...))
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Store == nil {
		opts.Store = store.NewMemory()
	}
	sessions, ok := opts.Store.(store.Sessions)
	if !ok {
		return nil, fmt.Errorf("server: Options.Store %T keeps no sessions (store.Sessions)", opts.Store)
	}
	s := &Server{opts: opts, log: opts.Logger, slots: make(chan struct{}, opts.MaxConcurrent), store: opts.Store, sessions: sessions,
		secrets: secrets, roots: privateRoots(opts.Registry.Dir(), storeDir(opts.Store)), keyer: opts.Tenants, tokens: tokens,
		breakers: tenant.NewBreakers(breakerSettings(opts.Config))}
	s.reg, s.misses = newMetrics()
	s.routes = map[string]route{
		"/healthz":      {method: http.MethodGet, open: true, handle: s.health},
		"/openapi.json": {method: http.MethodGet, open: true, handle: s.openapi},
		"/v1/plugins":   {method: http.MethodGet, handle: s.plugins},
		"/metrics":      {method: http.MethodGet, handle: s.metrics},
		"/v1/compact":   {method: http.MethodPost, work: true, handle: s.compact},
		"/v1/check":     {method: http.MethodPost, work: true, handle: s.check},
		"/v1/truncate":  {method: http.MethodPost, work: true, handle: s.truncate},
	}
	s.sessionRoutes = map[string]route{
		"PUT " + sessionPattern:    {method: http.MethodPut, work: true, handle: s.putSession},
		"GET " + sessionPattern:    {method: http.MethodGet, handle: s.getSession},
		"DELETE " + sessionPattern: {method: http.MethodDelete, handle: s.deleteSession},
		"POST " + messagesPattern:  {method: http.MethodPost, work: true, handle: s.appendMessages},
		"GET " + originalsPattern:  {method: http.MethodGet, handle: s.getOriginals},
	}
	return s, nil
}

// storeDir is the directory of a store kept in files, or "".
func storeDir(st store.Store) string {
	if d, ok := st.(interface{ Dir() string }); ok {
		return d.Dir()
	}
	return ""
}

// breakerSettings are the engine's breaker settings, or the engine's
// defaults for those not set.
func breakerSettings(c host.Config) (int, time.Duration) {
	failures, cooldown := c.BreakerFailures, c.BreakerCooldown
	if failures <= 0 {
		failures = 3
	}
	if cooldown <= 0 {
		cooldown = 5 * time.Minute
	}
	return failures, cooldown
}

// Handler returns the API's handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// statusWriter records the status written, for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	// tenant is whom the request acted for, once authorized.
	tenant tenant.ID
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (s *Server) serve(rw http.ResponseWriter, r *http.Request) {
	began := time.Now()
	w := &statusWriter{ResponseWriter: rw}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("handler panic", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			if w.status == 0 {
				writeError(w, errorf(http.StatusInternalServerError, CodeInternal, "the server failed: %s", s.public(fmt.Sprint(p))))
			}
		}
		s.log.Info("request", "method", r.Method, "path", r.URL.Path, "tenant", w.tenant, "status", w.status, "bytes_in", r.ContentLength,
			"bytes_out", w.bytes, "duration_ms", float64(time.Since(began).Microseconds())/1000)
	}()
	if aerr := s.dispatch(w, r); aerr != nil {
		// The log gets the whole story; the client what it may read.
		public := s.public(aerr.Message)
		if aerr.Status >= 500 || public != aerr.Message || aerr.cause != nil {
			level := slog.LevelInfo
			if aerr.Status >= 500 {
				level = slog.LevelWarn
			}
			attrs := []any{"path", r.URL.Path, "status", aerr.Status, "code", aerr.Code, "err", aerr.Message}
			if aerr.cause != nil {
				attrs = append(attrs, "cause", aerr.cause)
			}
			s.log.Log(r.Context(), level, "request failed", attrs...)
		}
		aerr.Message = public
		writeError(w, aerr)
	}
}

func (s *Server) dispatch(w *statusWriter, r *http.Request) *apiError {
	rt, ok := s.routes[r.URL.Path]
	allow := rt.method
	if !ok {
		rt, allow, ok = s.sessionRoute(r)
	}
	if !ok {
		return errorf(http.StatusNotFound, CodeNotFound, "no endpoint %s; the API has GET /healthz, GET /openapi.json, GET /metrics, GET /v1/plugins, POST /v1/compact, POST /v1/check, POST /v1/truncate and /v1/sessions/{id}", r.URL.Path)
	}
	if rt.handle == nil || r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", allow)
		return errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s takes %s, not %s", r.URL.Path, allow, r.Method)
	}
	if !rt.open {
		c, ok := s.authorize(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="compact-host"`)
			if r.Header.Get("Authorization") != "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="compact-host", error="invalid_token"`)
			}
			return errorf(http.StatusUnauthorized, CodeUnauthorized, "send one of the server's tokens as \"Authorization: Bearer <token>\"")
		}
		r = withCaller(r, c)
		w.tenant = c.tenant
	}
	ctx := r.Context()
	if s.opts.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	hasBody := rt.method == http.MethodPost || rt.method == http.MethodPut
	if hasBody && r.ContentLength > s.opts.MaxRequestBytes {
		return s.tooLarge()
	}
	// The body is read before the request waits for a worker, under its
	// own deadline: a client that sends slowly holds its connection, not
	// a worker that requests whose bodies have arrived could use.
	var body []byte
	if hasBody {
		deadline := time.Now().Add(s.opts.BodyTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(deadline)
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return s.tooLarge()
		case errors.Is(err, os.ErrDeadlineExceeded):
			return errorf(http.StatusRequestTimeout, CodeTimeout, "the body did not arrive within %s, the server's body timeout; send it faster, or in smaller requests", s.opts.BodyTimeout)
		case err != nil:
			return badRequest("read the body: %v", err)
		}
		_ = rc.SetReadDeadline(time.Time{})
	}
	if rt.work {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-ctx.Done():
			return errorf(http.StatusServiceUnavailable, CodeBusy, "all %d workers stayed busy until the request timed out; retry later", cap(s.slots))
		}
	}
	return rt.handle(w, r, body)
}

func (s *Server) tooLarge() *apiError {
	return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "the body is over the server's limit of %d bytes; keep the session on the server (/v1/sessions) and send only the new messages", s.opts.MaxRequestBytes)
}

// decode reads body into v, rejecting unknown fields and trailing data.
func decode(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return bodyError(body, errEmptyBody, v)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(body, err, v)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return bodyError(body, errTrailing, v)
	}
	return nil
}

// engine builds the engine of one request: the server's configuration
// with the request's overrides.
func (s *Server) engine(ctx context.Context, o EngineOptions, model host.ModelClient) (*host.Engine, *apiError) {
	cfg := s.opts.Config
	if len(o.Model) > maxNameBytes || len(o.Strategy) > maxNameBytes {
		return nil, badRequest("options: model and strategy names are at most %d bytes", maxNameBytes)
	}
	if o.Model != "" {
		// The server's window belongs to the server's model.
		cfg.Model, cfg.ContextWindow, cfg.MaxOutputTokens = o.Model, 0, 0
	}
	// Counts are in range once decoded (tokencount.Tokens).
	if o.ContextWindow > 0 {
		cfg.ContextWindow = int(o.ContextWindow)
	}
	if o.KeepRecentTokens > 0 {
		cfg.KeepRecentTokens = int(o.KeepRecentTokens)
	}
	if t := o.Thresholds; t != nil {
		for _, f := range []struct {
			name string
			v    float64
			to   *float64
		}{{"prune", t.Prune, &cfg.PruneThreshold}, {"compact", t.Compact, &cfg.CompactThreshold},
			{"overhead_reserve", t.OverheadReserve, &cfg.OverheadReserve}, {"emergency", t.Emergency, &cfg.EmergencyThreshold},
			{"min_savings", t.MinSavings, &cfg.MinSavings}} {
			// NaN fails both comparisons, so the test is written to
			// reject it.
			if !(f.v >= 0 && f.v <= 1) {
				return nil, badRequest("options.thresholds.%s %g: want a share between 0 and 1", f.name, f.v)
			}
			if f.v > 0 {
				*f.to = f.v
			}
		}
	}
	switch o.Policy {
	case "":
	case host.PolicyThreshold, host.PolicyCacheAware:
		cfg.Policy = o.Policy
	default:
		return nil, badRequest("options.policy %q: want threshold or cache-aware", o.Policy)
	}
	if !(o.ColdShare >= 0 && o.ColdShare <= 1) {
		return nil, badRequest("options.cold_share %g: want a share between 0 and 1", o.ColdShare)
	}
	if o.ColdShare > 0 {
		cfg.ColdShare = o.ColdShare
	}
	switch o.CacheTTL {
	case "":
	case "5m":
		cfg.CacheTTL = cost.TTL5m
	case "1h":
		cfg.CacheTTL = cost.TTL1h
	default:
		return nil, badRequest("options.cache_ttl %q: want 5m or 1h", o.CacheTTL)
	}
	if o.Strategy != "" {
		if _, err := s.opts.Registry.Strategy(ctx, o.Strategy); err != nil {
			if errors.Is(err, plugin.ErrNotFound) {
				names := StrategyNames(ctx, s.opts.Registry)
				return nil, errorf(http.StatusBadRequest, CodeUnknownStrategy, "options.strategy %q: no plugin provides it; the strategies are %s%s",
					o.Strategy, strings.Join(names, ", "), suggest.Hint(o.Strategy, names))
			}
			return nil, errorf(http.StatusBadRequest, CodeUnknownStrategy, "options.strategy %q: %s", o.Strategy, s.public(err.Error()))
		}
		cfg.Strategy = o.Strategy
	}
	opts := []host.Option{host.WithLogger(s.log), host.WithPlugins(s.opts.Registry)}
	if model != nil {
		opts = append(opts, host.WithModel(model))
	}
	e, err := host.New(cfg, opts...)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, CodeBadOptions, "%s", optionsError(err))
	}
	return e, nil
}

// workError maps an engine failure to an answer.
func workError(ctx context.Context, what string, err error) *apiError {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errorf(http.StatusGatewayTimeout, CodeTimeout, "%s did not finish within the request timeout: %v", what, err)
	}
	if ctx.Err() != nil {
		// The client went away; nobody reads this.
		return errorf(http.StatusServiceUnavailable, CodeBusy, "%s was cancelled: %v", what, err)
	}
	return errorf(http.StatusInternalServerError, CodeInternal, "%s failed: %v", what, err)
}

// abiVersion is the plugin ABI the server's host speaks.
var abiVersion = fmt.Sprintf("v%d.%d", abi.Major, abi.Minor)

// requestNames are the request fields that override host.Config fields;
// the others come from the server's configuration.
var requestNames = map[string]string{
	"Model":              "options.model",
	"ContextWindow":      "options.context_window",
	"Strategy":           "options.strategy",
	"KeepRecentTokens":   "options.keep_recent_tokens",
	"PruneThreshold":     "options.thresholds.prune",
	"CompactThreshold":   "options.thresholds.compact",
	"OverheadReserve":    "options.thresholds.overhead_reserve",
	"EmergencyThreshold": "options.thresholds.emergency",
	"MinSavings":         "options.thresholds.min_savings",
}

// optionsError words an engine config error with the request's field
// names, and the server's settings as such.
func optionsError(err error) string {
	var ce *host.ConfigError
	if !errors.As(err, &ce) {
		return strings.TrimPrefix(err.Error(), "host: config: ")
	}
	return ce.Format(func(f string) string {
		if n, ok := requestNames[f]; ok {
			return n
		}
		return "the server's " + f
	})
}
