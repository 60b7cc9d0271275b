package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/storeopen"
	"github.com/compact-host/compact-host/internal/proxy"
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
}

func newProxyCmd(g *globals) *cobra.Command {
	o := &proxyOptions{}
	cmd := &cobra.Command{
		Use:   "proxy --upstream URL [flags]",
		Short: "Compact the conversations of agents you did not write: a proxy on their provider base URL",
		Long: `Listen where an agent expects its provider (ANTHROPIC_BASE_URL,
OPENAI_BASE_URL) and forward everything to --upstream unchanged, except the
messages of a conversation the gate says must shrink. The folded prefix is
replaced by a summary in the request's own format, and every later request
of that conversation gets the same summary bytes, so the provider's prompt
cache stays warm and no summary is paid twice.

Messages requests are POST .../v1/messages (Anthropic) and
POST .../chat/completions (OpenAI-compatible); the API is detected from the
path unless --kind says. Everything else (count_tokens, models, files...)
passes through untouched. Answers stream back as they arrive.

The window comes from the request's model in the catalog, or
--context-window; the reply reserve from the request's max_tokens.
Summaries are asked of the same upstream with the client's own
credentials, through a cheaper model of the provider when the catalog knows
one (--compaction-model to choose). A context-overflow error from the
upstream is compacted and retried once. When anything fails the request goes
on as it came: the proxy is never worse than no proxy.

Metrics (Prometheus text format) are at /_compact-host/metrics on the
listen address, a path no provider uses. Logs carry a conversation ID,
never content or keys.`,
		Example: `  # Claude Code, with compaction at its own threshold:
  compact-host proxy --upstream https://api.anthropic.com &
  ANTHROPIC_BASE_URL=http://127.0.0.1:8378 claude

  # Codex, opencode or any OpenAI client:
  compact-host proxy --listen 127.0.0.1:8379 --upstream https://api.openai.com &
  OPENAI_BASE_URL=http://127.0.0.1:8379/v1 codex

  # A local Ollama model the catalog does not know: say its window.
  compact-host proxy --upstream http://localhost:11434 --context-window 32768

  curl -s http://127.0.0.1:8378/_compact-host/metrics | grep compact_host_proxy_compactions`,
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
	fl.StringVar(&o.kind, "kind", "auto", "API of the messages requests: auto (from the path), anthropic or openai")
	fl.StringVar(&o.store, "store", "", "where compactions are kept, shared by every proxy that names the same one: "+storeopen.Usage+"; default $COMPACT_HOST_STORE, the config's store, or disk")
	fl.BoolVar(&o.offline, "offline", false, "summarize without calling a model")
	fl.Int64Var(&o.maxBodyBytes, "max-body-bytes", proxy.DefaultMaxBodyBytes, "largest body read to compact; a larger one is forwarded untouched")
	fl.DurationVar(&o.lockWait, "lock-wait", proxy.DefaultLockWait, "how long a request waits for another request's compaction of the same conversation")
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
	case proxy.KindAnthropic, proxy.KindOpenAI:
	default:
		return usageError{fmt.Errorf("--kind %q: want auto, anthropic or openai", o.kind)}
	}
	if o.maxBodyBytes <= 0 || o.lockWait <= 0 {
		return usageError{errors.New("--max-body-bytes and --lock-wait must be positive")}
	}
	a, err := newApp(g, o.engine)
	if err != nil {
		return err
	}
	defer a.close()
	hc := a.hostConfig()
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
	p, err := proxy.New(proxy.Options{
		Upstream: up, Kind: kind, Config: hc, Registry: reg, Store: st, Logger: a.log,
		CompactionModel: pick(o.engine.compactModel, a.cfg.Provider.CompactionModel),
		Offline:         o.offline, MaxBodyBytes: o.maxBodyBytes, LockWait: o.lockWait,
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
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	a.note("compact-host %s proxying http://%s to %s (metrics at http://%s%smetrics)", Version, ln.Addr(), up.Redacted(), ln.Addr(), proxy.AdminPrefix)
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
