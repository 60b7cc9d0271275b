package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/compact-host/compact-host/host"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/storeopen"
	"github.com/compact-host/compact-host/internal/proxy"
	"github.com/compact-host/compact-host/internal/tenant"
	"github.com/spf13/cobra"
)

// defaultProxyAddr is loopback, where agents expect their provider.
const defaultProxyAddr = "127.0.0.1:8378"

type proxyOptions struct {
	engine       engineFlags
	listen       string
	upstream     string
	kind         string
	store        string
	offline      bool
	maxBodyBytes int64
	lockWait     time.Duration

	tenantSecretFile string
	shareCompactions bool
	metricsTokenEnv  string
	bodyReadTimeout  time.Duration
	bodyIdleTimeout  time.Duration
	maxBodyReads     int
	forwardWS        bool
	websockets       string
	wsIdleTimeout    time.Duration
	policy           string
	coldShare        float64
	cacheTTL         time.Duration
	mcp              bool
	recallHint       string
	keepOriginals    bool
}

// websocketMode is --websockets, or forward for the deprecated
// --forward-websockets when --websockets was left at its default.
func (o *proxyOptions) websocketMode() string {
	if o.forwardWS && o.websockets == proxy.WebSocketsRelay {
		return proxy.WebSocketsForward
	}
	return o.websockets
}

func newProxyCmd(g *globals) *cobra.Command {
	o := &proxyOptions{}
	cmd := &cobra.Command{
		Use:   "proxy --upstream URL [flags]",
		Short: "Compact the conversations of agents you did not write: a proxy on their provider base URL",
		Long: `Listen where an agent expects its provider (ANTHROPIC_BASE_URL,
OPENAI_BASE_URL, GOOGLE_GEMINI_BASE_URL) and forward everything to --upstream unchanged, except the
messages of a conversation the gate says must shrink. The folded prefix is
replaced by a summary in the request's own format, and every later request
of that conversation gets the same summary bytes, so the provider's prompt
cache stays warm and no summary is paid twice.

Messages requests are POST .../v1/messages (Anthropic),
POST .../chat/completions (OpenAI-compatible) and POST .../v1/responses
(OpenAI Responses, Codex's API; its "input" items are compacted, its
"instructions" kept) and POST .../models/<model>:generateContent or
:streamGenerateContent (Gemini API; its "contents" are compacted, its
"systemInstruction" kept); the API is detected from the path unless --kind
says (openai covers both OpenAI APIs). Everything else (count_tokens, models,
files, /v1/responses/compact...) passes through untouched. Answers stream
back as they arrive. A Responses request chained on previous_response_id
holds only its newest items, the provider the rest: it passes through.
A Responses WebSocket (GET /v1/responses, which Codex tries first) is
relayed (--websockets relay, the default): each response.create on it is
gated and compacted as an HTTP request is, and the upstream's events go
back as they arrive. A request chained on the previous response is read as
the whole conversation and goes on chained while nothing needs folding; a
compacted one goes whole. --websockets refuse answers 426 Upgrade Required,
and Codex then sends its turns over HTTP; --websockets forward forwards the
WebSocket uncompacted. A relayed WebSocket is closed with 1009 for a
message over 8x --max-body-bytes, 1003 for a binary message, 1008 for a
message that does not arrive within --body-read-timeout, and 1001 after
--websocket-idle-timeout with nothing sent either way.

The window comes from the request's model in the catalog, or
--context-window; the reply reserve from the request's max_tokens.
Summaries are asked of the same upstream with the client's own
credentials, through a cheaper model of the provider when the catalog knows
one (--compaction-model to choose). A context-overflow error from the
upstream is compacted and retried once. When anything fails the request goes
on as it came: the proxy is never worse than no proxy.

Everything the proxy stores or locks is scoped by tenant: a keyed hash
(HMAC-SHA256) of the request's credential (x-api-key, Authorization,
x-goog-api-key, api-key or ?key=), never the key itself. Nothing made with
one credential is served to another; requests without one are their own
tenant. The hash's secret is random per process unless
--tenant-secret-file names one: replicas that share a --store need the
same file. --share-compactions puts every client in one tenant, so each
gets summaries made with another's key and can tell by the timing whether
anyone sent a given conversation: only for clients that trust each other.

A summary call is bounded by --provider-timeout per attempt and retried as
the config's provider.max_retries says; after one fails, the request asks
no more and compacts without the model. After 3 failed summary calls in a
row a tenant's compactions are made without the model for 5 minutes.

Request bodies are read as they arrive, at most --max-body-reads at once
(beyond that a request is forwarded untouched), within --body-read-timeout
and with no pause over --body-idle-timeout (else 408). Paths with dot
segments (/v1/../x, %2e%2e) are refused with a 400.

Metrics (Prometheus text format) are at /_compact-host/metrics on the
listen address, a path no provider uses; --metrics-token-env protects them
with a bearer token. Logs carry a conversation ID, never content or keys:
every line passes one redaction of the request's own credentials and of
anything shaped like a key, upstream errors quoted back included.

A summary names what it folded with markers ([recall:s-…] for the folded
messages, [recall:t-…] for each large tool output), and the proxy keeps the
originals in --store (--keep-originals, on by default), scoped by tenant and
conversation, within the store's size limit (max_session_bytes) and expiry.
--mcp serves the recall and search tools over them at /_compact-host/mcp
(MCP over streamable HTTP): the agent sends the same credential it sends
upstream (x-api-key, Authorization...) and reads only its own tenant's
originals; a marker finds its own conversation. --recall-hint auto (the
default) ends every summary with a line naming the tools when --mcp is on,
and never otherwise, so no request names a tool the agent lacks; on adds it
for an agent that runs 'compact-host mcp --conversation' itself; off never does.`,
		Example: `  # Claude Code, with compaction at its own threshold:
  compact-host proxy --upstream https://api.anthropic.com &
  ANTHROPIC_BASE_URL=http://127.0.0.1:8378 claude

  # Codex: openai_base_url = "http://127.0.0.1:8379/v1" in ~/.codex/config.toml
  compact-host proxy --listen 127.0.0.1:8379 --upstream https://api.openai.com &
  codex

  # opencode or any OpenAI SDK client:
  OPENAI_BASE_URL=http://127.0.0.1:8379/v1 opencode

  # Gemini CLI with an API key (the catalog has no Gemini windows: say it):
  compact-host proxy --listen 127.0.0.1:8380 --upstream https://generativelanguage.googleapis.com --context-window 1048576 &
  GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8380 GEMINI_API_KEY=... gemini

  # A local Ollama model the catalog does not know: say its window.
  compact-host proxy --upstream http://localhost:11434 --context-window 32768

  curl -s http://127.0.0.1:8378/_compact-host/metrics | grep compact_host_proxy_compactions

  # Claude Code with the recall tools served by the proxy: claude --mcp-config mcp.json,
  #   {"mcpServers":{"compact-host":{"type":"http","url":"http://127.0.0.1:8378/_compact-host/mcp",
  #     "headers":{"x-api-key":"${ANTHROPIC_API_KEY}"}}}}
  compact-host proxy --upstream https://api.anthropic.com --mcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runProxy(cmd.Context(), g, o) },
	}
	addEngineFlags(cmd, &o.engine)
	fl := cmd.Flags()
	// Summaries go to the upstream with the client's credentials; a
	// provider of their own has no place here.
	fl.MarkHidden("provider")
	fl.MarkHidden("base-url")
	fl.StringVar(&o.listen, "listen", defaultProxyAddr, "address to listen on (host:port; port 0 picks a free one)")
	fl.StringVar(&o.upstream, "upstream", "", "the provider's base URL, e.g. https://api.anthropic.com, https://api.openai.com, http://localhost:11434 (required)")
	fl.StringVar(&o.kind, "kind", "auto", "API of the messages requests: auto (from the path), anthropic, openai (Chat Completions and Responses), or gemini")
	fl.StringVar(&o.store, "store", "", "where compactions are kept, shared by every proxy that names the same one: "+storeopen.Usage+"; default $COMPACT_HOST_STORE, the config's store, or disk")
	fl.BoolVar(&o.offline, "offline", false, "summarize without calling a model")
	fl.Int64Var(&o.maxBodyBytes, "max-body-bytes", proxy.DefaultMaxBodyBytes, "largest body read to compact; a larger one is forwarded untouched")
	fl.DurationVar(&o.lockWait, "lock-wait", proxy.DefaultLockWait, "longest wait for another request's compaction of the same prefix; past it the request goes on uncompacted")
	fl.StringVar(&o.tenantSecretFile, "tenant-secret-file", "", "file holding the secret (16 bytes or more) tenants are keyed with; replicas sharing a store need the same (default: random per process)")
	fl.BoolVar(&o.shareCompactions, "share-compactions", false, "share compactions across credentials (risk: a client gets summaries of others' conversations and learns by timing what others sent)")
	fl.StringVar(&o.metricsTokenEnv, "metrics-token-env", "", "name of the environment variable holding the bearer token /_compact-host/metrics requires (default: none, metrics open)")
	fl.DurationVar(&o.bodyReadTimeout, "body-read-timeout", proxy.DefaultBodyReadTimeout, "a body to compact must arrive within this")
	fl.DurationVar(&o.bodyIdleTimeout, "body-idle-timeout", proxy.DefaultBodyIdleTimeout, "longest pause in a request body")
	fl.IntVar(&o.maxBodyReads, "max-body-reads", proxy.DefaultMaxBodyReads, "bodies read into memory at once; beyond it a request is forwarded untouched")
	fl.StringVar(&o.websockets, "websockets", proxy.WebSocketsRelay, "Responses API WebSockets (Codex): relay (compact each request on them), refuse (answer 426, so Codex uses HTTP) or forward (uncompacted)")
	fl.DurationVar(&o.wsIdleTimeout, "websocket-idle-timeout", proxy.DefaultWebSocketIdleTimeout, "close a relayed WebSocket (1001) after this long with nothing sent either way")
	fl.BoolVar(&o.forwardWS, "forward-websockets", false, "forward Responses API WebSockets uncompacted")
	_ = fl.MarkDeprecated("forward-websockets", "use --websockets forward")
	fl.BoolVar(&o.mcp, "mcp", false, "serve the recall and search tools (MCP over streamable HTTP) at /_compact-host/mcp, for the tenant of the credential each request sends")
	fl.StringVar(&o.recallHint, "recall-hint", "auto", "end every summary with a line naming the recall tools: auto (when --mcp is on), on (the agent runs 'compact-host mcp --conversation' itself) or off")
	fl.BoolVar(&o.keepOriginals, "keep-originals", true, "keep what compactions fold in --store, so that the summaries' markers can be recalled (--mcp, 'compact-host mcp --conversation')")
	fl.StringVar(&o.policy, "policy", host.PolicyThreshold, "when to compact: threshold (past the gate's share) or cache-aware (past --cold-share once the conversation's prompt cache has expired; a warm cache only halfway from the gate's share to its emergency share)")
	fl.Float64Var(&o.coldShare, "cold-share", 0.5, "with --policy cache-aware: the share of the budget past which a conversation whose cache expired is compacted")
	fl.DurationVar(&o.cacheTTL, "cache-ttl", 5*time.Minute, "how long the provider keeps a prompt cache without a request, when a request's cache_control names no ttl (5m or 1h)")
	return cmd
}

func runProxy(ctx context.Context, g *globals, o *proxyOptions) error {
	if o.upstream == "" {
		return usageError{errors.New("--upstream is required, e.g. --upstream https://api.anthropic.com")}
	}
	up, err := url.Parse(o.upstream)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
		return usageError{fmt.Errorf("--upstream %q: want an http or https URL such as https://api.anthropic.com", o.upstream)}
	}
	kind := o.kind
	switch kind {
	case "auto":
		kind = ""
	case proxy.KindAnthropic, proxy.KindOpenAI, proxy.KindGemini:
	default:
		return usageError{fmt.Errorf("--kind %q: want auto, anthropic, openai or gemini", o.kind)}
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"--max-body-bytes", o.maxBodyBytes <= 0}, {"--lock-wait", o.lockWait <= 0}, {"--body-read-timeout", o.bodyReadTimeout <= 0},
		{"--body-idle-timeout", o.bodyIdleTimeout <= 0}, {"--max-body-reads", o.maxBodyReads <= 0}, {"--cache-ttl", o.cacheTTL <= 0},
	} {
		if f.bad {
			return usageError{fmt.Errorf("%s must be positive", f.name)}
		}
	}
	var metricsToken string
	if o.metricsTokenEnv != "" {
		if metricsToken = g.io.Getenv(o.metricsTokenEnv); metricsToken == "" {
			return usageError{fmt.Errorf("--metrics-token-env %s: the variable is unset or empty", o.metricsTokenEnv)}
		}
	}
	keyer := tenant.NewRandomKeyer()
	if o.tenantSecretFile != "" {
		if keyer, err = tenant.LoadKeyer(o.tenantSecretFile); err != nil {
			return withCode(ExitInput, fmt.Errorf("--tenant-secret-file: %w", err))
		}
	}
	a, err := newApp(g, o.engine)
	if err != nil {
		return err
	}
	defer a.close()
	hc := a.hostConfig()
	if o.policy != host.PolicyThreshold && o.policy != host.PolicyCacheAware {
		return usageError{fmt.Errorf("--policy %q: want threshold or cache-aware", o.policy)}
	}
	if !(o.coldShare > 0 && o.coldShare <= 1) {
		return usageError{fmt.Errorf("--cold-share %g: want a share above 0, at most 1", o.coldShare)}
	}
	hc.Policy, hc.ColdShare, hc.CacheTTL = o.policy, o.coldShare, o.cacheTTL
	if hc.RecallHint, err = o.recallHintOn(); err != nil {
		return err
	}
	if o.engine.model == "" && a.cfg.Model == "" {
		hc.Model = "" // each request's own model sizes its budget
	}
	st, err := openStore(ctx, a, o.store)
	if err != nil {
		return err
	}
	reg, err := a.plugins(ctx, true)
	if err != nil {
		st.Close()
		return err
	}
	timeout, retries := a.providerLimits()
	p, err := proxy.New(proxy.Options{
		Upstream: up, Kind: kind, Config: hc, Registry: reg, Store: st, Logger: a.log,
		CompactionModel: pick(o.engine.compactModel, a.cfg.Provider.CompactionModel),
		Offline:         o.offline, MaxBodyBytes: o.maxBodyBytes, LockWait: o.lockWait,
		TenantKeyer: keyer, ShareCompactions: o.shareCompactions, MetricsToken: metricsToken,
		BodyReadTimeout: o.bodyReadTimeout, BodyIdleTimeout: o.bodyIdleTimeout, MaxBodyReads: o.maxBodyReads,
		ProviderTimeout: timeout, ProviderMaxRetries: retries, WebSockets: o.websocketMode(),
		WebSocketIdleTimeout: o.wsIdleTimeout, MCP: o.mcp, DiscardOriginals: !o.keepOriginals,
	})
	if err != nil {
		return withCode(ExitUsage, err)
	}
	defer p.Close()
	ln, err := listen(o.listen)
	if err != nil {
		return err
	}
	if !loopback(o.listen) {
		a.note("warning: %s is reachable beyond this machine; the proxy forwards with whatever credentials its clients send", o.listen)
	}
	hs := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          slog.NewLogLogger(p.Logger().Handler(), slog.LevelWarn),
	}
	if o.shareCompactions {
		a.note("warning: --share-compactions: every client gets summaries made with other clients' keys, and can tell by the timing what others sent")
	}
	a.note("compact-host %s proxying http://%s to %s (metrics at http://%s%smetrics)", Version, ln.Addr(), up.Redacted(), ln.Addr(), proxy.AdminPrefix)
	if o.mcp {
		a.note("recall tools (MCP) at http://%s%s, for the credential each request sends", ln.Addr(), proxy.MCPPath)
	}
	// Agents stream long answers; give them a while, not forever.
	return serveUntilDone(ctx, a, hs, ln, time.Minute)
}

// openStore opens the store the flag, the environment or the config
// names, for the proxy and for serve. A store that cannot be reached at
// start is an error: a replica that silently kept its own store would
// compact every conversation again, or lose its sessions. One that fails
// later is survived request by request (the proxy forwards; serve's
// session endpoints answer 503).
func openStore(ctx context.Context, a *app, flag string) (store.Store, error) {
	name := pick(flag, a.cfg.Store)
	dir := ""
	if a.cfg.CacheDir != "" {
		dir = filepath.Join(a.cfg.CacheDir, "store")
	}
	openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := storeopen.Open(openCtx, name, storeopen.Options{DiskDir: dir, Logger: a.log})
	if err != nil {
		return nil, withCode(ExitInput, fmt.Errorf("--store %q: %w", redactURL(name), err))
	}
	a.log.Info("store", "store", redactURL(name))
	return st, nil
}

// redactURL hides a password in a store URL before it is logged.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	return raw
}
