package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/store/storeopen"
	"github.com/compact-host/compact-host/internal/server"
	"github.com/spf13/cobra"
)

// defaultServeAddr is loopback: the API is opened to the network only on
// purpose.
const defaultServeAddr = "127.0.0.1:8377"

type serveOptions struct {
	engine          engineFlags
	addr            string
	tokenEnv        string
	maxRequestBytes int64
	requestTimeout  time.Duration
	bodyTimeout     time.Duration
	maxConcurrent   int
	store           string
}

func newServeCmd(g *globals) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Serve the engine over HTTP: a JSON API for agents in any language",
		Long: `Serve compaction over HTTP, so an agent written in any language calls the
same engine as the CLI. The server is stateless: each request carries its
session and gets it back compacted, so any number of servers can stand
behind a load balancer. Sessions by ID (/v1/sessions/{id}) are the one
exception: the store keeps them, so a client sends only its new messages.
Servers that share a store (--store redis://...) serve the same sessions;
the default store is on this machine's disk. Plugins dropped into the
plugins directory are picked up without a restart.

It listens on loopback unless --listen says otherwise; binding another
address without a token prints a warning. With --token-env, every
endpoint but /healthz requires "Authorization: Bearer <token>". SIGINT or
SIGTERM stops it gracefully: requests in flight finish first.

Flags override the [serve] section of the config file (compact-host help
config); the engine flags set the defaults each request may override.

` + server.Reference,
		Example: `  # Start it, offline summaries, on 127.0.0.1:8377:
  compact-host serve

  # Compact a Claude Code session (a JSONL file goes in as a string):
  jq -Rs '{session: ., output_format: "anthropic"}' ~/.claude/projects/x/abc.jsonl |
    curl -s --data-binary @- http://127.0.0.1:8377/v1/compact | jq .report

  # Compact an Anthropic request, keeping the auth bug in the summary:
  jq '{session: ., options: {focus: "the auth bug", strategy: "structured"}}' request.json |
    curl -s --data-binary @- http://127.0.0.1:8377/v1/compact | jq .session > compacted.json

  # The gate, before a model call: measure, then apply if needed:
  curl -s -d '{"session": [{"role":"user","content":[{"type":"text","text":"hi"}]}],
               "request": {"tool_schema_tokens": 4000}}' http://127.0.0.1:8377/v1/check

  # Cap a tool output before it enters the session:
  go test ./... 2>&1 | jq -Rs '{tool: "Bash", content: ., max_tokens: 2000}' |
    curl -s --data-binary @- http://127.0.0.1:8377/v1/truncate | jq -r .content

  # A session by ID: create it, append only the new messages, read it back:
  curl -s -X PUT -d '{"session": [{"role":"user","content":[{"type":"text","text":"hi"}]}]}' \
    http://127.0.0.1:8377/v1/sessions/agent-1
  curl -s -d '{"messages": [{"role":"assistant","content":[{"type":"text","text":"hello"}]}]}' \
    http://127.0.0.1:8377/v1/sessions/agent-1/messages
  curl -s 'http://127.0.0.1:8377/v1/sessions/agent-1?output_format=anthropic' | jq .messages

  # Replicas sharing their sessions:
  compact-host serve --store redis://10.0.0.5:6379/0

  # On a shared network, with a token:
  export COMPACT_HOST_TOKEN=$(openssl rand -hex 32)
  compact-host serve --listen 0.0.0.0:8377 --token-env COMPACT_HOST_TOKEN
  curl -s -H "Authorization: Bearer $COMPACT_HOST_TOKEN" http://host:8377/v1/plugins`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), g, o, cmd) },
	}
	addEngineFlags(cmd, &o.engine)
	addOfflineFallbackFlag(cmd, &o.engine)
	fl := cmd.Flags()
	fl.StringVar(&o.addr, "listen", defaultServeAddr, "address to listen on (host:port; port 0 picks a free one)")
	deprecatedAlias(cmd, g, "addr", "listen")
	fl.StringVar(&o.tokenEnv, "token-env", "", "name of the environment variable holding the bearer token the API requires (default: [serve] token_env; none: no token)")
	fl.Int64Var(&o.maxRequestBytes, "max-request-bytes", 0, "largest request body accepted, larger ones get 413 (default: [serve] max_request_bytes, or 64 MiB)")
	fl.DurationVar(&o.requestTimeout, "request-timeout", 0, "bound on one request, its wait for a worker included (default: [serve] request_timeout, or 5m)")
	fl.DurationVar(&o.bodyTimeout, "body-timeout", 0, "bound on the arrival of a request body, read before it waits for a worker; slower ones get 408 (default: [serve] body_timeout, or 30s)")
	fl.IntVar(&o.maxConcurrent, "max-concurrent", 0, "requests worked on at once; more wait for a worker (default: twice the CPUs)")
	fl.StringVar(&o.store, storeopen.Flag, "", "where sessions by ID (/v1/sessions) and their compactions are kept, shared by every server that names the same one: "+storeopen.Usage+"; default $COMPACT_HOST_STORE, the config's store, or disk")
	return cmd
}

func runServe(ctx context.Context, g *globals, o *serveOptions, cmd *cobra.Command) error {
	switch {
	case o.maxRequestBytes < 0:
		return usageError{fmt.Errorf("--max-request-bytes %d: want a positive byte count", o.maxRequestBytes)}
	case o.requestTimeout < 0:
		return usageError{fmt.Errorf("--request-timeout %s: want a positive duration", o.requestTimeout)}
	case o.bodyTimeout < 0:
		return usageError{fmt.Errorf("--body-timeout %s: want a positive duration", o.bodyTimeout)}
	case o.maxConcurrent < 0 || o.maxConcurrent > 10000:
		return usageError{fmt.Errorf("--max-concurrent %d: want 1 to 10000, or 0 for twice the CPUs", o.maxConcurrent)}
	}
	a, err := newApp(g, o.engine)
	if err != nil {
		return err
	}
	defer a.close()
	sc := a.cfg.Serve
	addr := o.addr
	if !cmd.Flags().Changed("listen") && !cmd.Flags().Changed("addr") && sc.Addr != "" {
		addr = sc.Addr
	}
	token := ""
	if env := pick(o.tokenEnv, sc.TokenEnv); env != "" {
		// A token asked for but missing would leave the API open: refuse.
		if token = strings.TrimSpace(g.io.Getenv(env)); token == "" {
			return usageError{fmt.Errorf("--token-env %s: the variable is unset or empty", env)}
		}
	}
	if !loopback(addr) && token == "" {
		a.note("warning: %s is reachable beyond this machine and no token is required (set --token-env)", addr)
	}

	// Only an existing directory can be watched; a server promises that
	// a plugin dropped in later is picked up, so the directory is made.
	if dir := pluginsDirOf(a.pluginOptions(true).PluginsDir, g.io.Getenv); dir != "" {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				a.note("warning: plugins directory %s cannot be made, so it is not watched: %v", dir, err)
			} else {
				a.note("made the plugins directory %s", dir)
			}
		}
		a.flags.pluginsDir = dir // the registry opens the same one
	}
	reg, err := a.plugins(ctx, true)
	if err != nil {
		return err
	}
	// Load the built-ins now, not on the first request: the first load
	// compiles them.
	a.progress("loading plugins…")
	loaded, broken := 0, 0
	for _, e := range reg.List(ctx) {
		switch {
		case e.Err != nil:
			broken++
			a.note("warning: plugin %s is broken: %v", e.Name, e.Err)
		case e.Loaded:
			loaded++
		}
	}
	hc := a.hostConfig()
	model, err := a.model()
	if err != nil {
		return err
	}
	st, err := openStore(ctx, a, o.store)
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := server.New(server.Options{
		Config: hc, Registry: reg, Model: model, Logger: a.log, Version: Version,
		MaxRequestBytes: pick(o.maxRequestBytes, sc.MaxRequestBytes),
		RequestTimeout:  pick(o.requestTimeout, sc.RequestTimeout.Duration),
		BodyTimeout:     pick(o.bodyTimeout, sc.BodyTimeout.Duration),
		Token:           token, MaxConcurrent: o.maxConcurrent, Store: st,
	})
	if err != nil {
		var ce *host.ConfigError
		if errors.As(err, &ce) {
			return a.settingError(err)
		}
		return withCode(ExitUsage, err)
	}
	ln, err := listen(addr)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	auth := "no token"
	if token != "" {
		auth = "bearer token required"
	}
	a.note("compact-host %s serving on http://%s (%d plugins, %d broken; %s)", Version, ln.Addr(), loaded, broken, auth)

	grace := pick(o.requestTimeout, sc.RequestTimeout.Duration)
	if grace <= 0 || grace > time.Minute {
		grace = time.Minute
	}
	return serveUntilDone(ctx, a, hs, ln, grace)
}

// serveUntilDone serves on ln until ctx ends (SIGINT or SIGTERM), then
// lets the requests in flight finish for at most grace: long answers get
// a while, not forever.
func serveUntilDone(ctx context.Context, a *app, hs *http.Server, ln net.Listener, grace time.Duration) error {
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return withCode(ExitError, err)
	case <-ctx.Done():
	}
	a.note("shutting down: finishing the requests in flight")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
		return withCode(ExitError, fmt.Errorf("shutdown: %w", err))
	}
	a.note("stopped")
	return nil
}

// pluginsDirOf resolves the plugins directory as the registry does: the
// flag or config, $COMPACT_HOST_PLUGINS_DIR, the user config directory.
func pluginsDirOf(dir string, getenv func(string) string) string {
	if dir != "" {
		return dir
	}
	if d := getenv(plugin.EnvPluginsDir); d != "" {
		return d
	}
	base, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(base, "compact-host", "plugins")
}

// loopback reports whether addr only listens on this machine.
func loopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
