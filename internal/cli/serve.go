package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/storeopen"
	"github.com/compact-host/compact-host/internal/server"
	"github.com/compact-host/compact-host/internal/tenant"
	"github.com/spf13/cobra"
)

// defaultServeAddr is loopback: the API is opened to the network only on
// purpose.
const defaultServeAddr = "127.0.0.1:8377"

type serveOptions struct {
	engine          engineFlags
	addr            string
	tokenEnv        string
	tokenFile       string
	tenantSecret    string
	tenantSessions  int
	tenantBytes     int64
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
address without a token prints a warning. With --token-env or
--token-file, every endpoint but /healthz and /openapi.json requires
"Authorization: Bearer <token>". Each token is a tenant: the sessions
one token makes are reached by it alone (another token gets 404), and
each token keeps at most --tenant-max-sessions sessions and
--tenant-max-bytes bytes; past that, its own sessions written longest
ago are removed, never another token's. SIGINT or SIGTERM stops it
gracefully: requests in flight finish first, and plugin processes are
stopped.

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
  curl -s -H "Authorization: Bearer $COMPACT_HOST_TOKEN" http://host:8377/v1/plugins

  # One token per team, each its own tenant (name:token, one a line):
  printf 'search:%s\nbilling:%s\n' $(openssl rand -hex 32) $(openssl rand -hex 32) > tokens
  chmod 600 tokens
  compact-host serve --listen 0.0.0.0:8377 --token-file tokens --tenant-max-sessions 200`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), g, o, cmd) },
	}
	addEngineFlags(cmd, &o.engine)
	addOfflineFallbackFlag(cmd, &o.engine)
	fl := cmd.Flags()
	fl.StringVar(&o.addr, "listen", defaultServeAddr, "address to listen on (host:port; port 0 picks a free one)")
	deprecatedAlias(cmd, g, "addr", "listen")
	fl.StringVar(&o.tokenEnv, "token-env", "", "name of the environment variable holding the bearer token the API requires (default: [serve] token_env; none: no token)")
	fl.StringVar(&o.tokenFile, "token-file", "", "file of the bearer tokens the API accepts, one a line, each \"name:token\" or a bare token (one holding ':' needs a name); '#' starts a comment; each token is a tenant of its own")
	fl.StringVar(&o.tenantSecret, "tenant-secret-file", "", "file of the secret that turns each token into its tenant's ID in the store; servers sharing a store share it (default: made once in the cache directory)")
	fl.IntVar(&o.tenantSessions, "tenant-max-sessions", 0, fmt.Sprintf("sessions one token keeps; past it, its own written longest ago are removed (default %d)", server.DefaultTenantMaxSessions))
	fl.Int64Var(&o.tenantBytes, "tenant-max-bytes", 0, fmt.Sprintf("bytes of sessions one token keeps; past it, its own written longest ago are removed, and a session over it alone is refused with 507 (default %d)", server.DefaultTenantMaxBytes))
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
	case o.tenantSessions < 0 || o.tenantSessions > server.MaxTenantSessions:
		return usageError{fmt.Errorf("--tenant-max-sessions %d: want 1 to %d, or 0 for %d", o.tenantSessions, server.MaxTenantSessions, server.DefaultTenantMaxSessions)}
	case o.tenantBytes < 0:
		return usageError{fmt.Errorf("--tenant-max-bytes %d: want a positive byte count, or 0 for %d", o.tenantBytes, server.DefaultTenantMaxBytes)}
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
	var tokens []server.Token
	if env := pick(o.tokenEnv, sc.TokenEnv); env != "" {
		// A token asked for but missing would leave the API open: refuse.
		token := strings.TrimSpace(g.io.Getenv(env))
		if token == "" {
			return usageError{fmt.Errorf("--token-env %s: the variable is unset or empty", env)}
		}
		tokens = append(tokens, server.Token{Name: "$" + env, Secret: token})
	}
	if o.tokenFile != "" {
		fileTokens, err := readTokenFile(o.tokenFile)
		if err != nil {
			return withCode(ExitInput, err)
		}
		for _, t := range fileTokens {
			if len(tokens) > 0 && tokens[0].Secret == t.Secret {
				return withCode(ExitInput, fmt.Errorf("--token-file %s: token %q is the token of --token-env too; give each tenant one token", o.tokenFile, t.Name))
			}
		}
		tokens = append(tokens, fileTokens...)
		if info, err := os.Stat(o.tokenFile); err == nil && info.Mode().Perm()&0o077 != 0 {
			a.note("warning: --token-file %s can be read by other users (mode %s); chmod 600 it", o.tokenFile, info.Mode().Perm())
		}
	}
	if !loopback(addr) && len(tokens) == 0 {
		a.note("warning: %s is reachable beyond this machine and no token is required (set --token-env or --token-file)", addr)
	}
	var keyer *tenant.Keyer
	if len(tokens) > 0 {
		if keyer, err = serveKeyer(a, o.tenantSecret); err != nil {
			return err
		}
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
	if d, ok := st.(*store.Disk); ok && len(tokens) > 1 {
		perTenant := pick(o.tenantSessions, server.DefaultTenantMaxSessions) + 1 // and its quota ledger
		if need := len(tokens) * perTenant; need > d.MaxSessions() {
			a.note("warning: %d tokens may keep %d sessions (with their quota ledgers), over the %d the disk store keeps: past that it removes the oldest, whoever made them; lower --tenant-max-sessions to %d or raise max_sessions in the store's URL (file:///dir?max_sessions=N)",
				len(tokens), need, d.MaxSessions(), d.MaxSessions()/len(tokens)-1)
		}
	}
	srv, err := server.New(server.Options{
		Config: hc, Registry: reg, Model: model, Logger: a.log, Version: Version,
		MaxRequestBytes: pick(o.maxRequestBytes, sc.MaxRequestBytes),
		RequestTimeout:  pick(o.requestTimeout, sc.RequestTimeout.Duration),
		BodyTimeout:     pick(o.bodyTimeout, sc.BodyTimeout.Duration),
		Tokens:          tokens, Tenants: keyer, MaxConcurrent: o.maxConcurrent, Store: st,
		Quota: server.Quota{MaxSessions: o.tenantSessions, MaxBytes: o.tenantBytes},
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
	switch {
	case len(tokens) == 1:
		auth = "bearer token required"
	case len(tokens) > 1:
		auth = fmt.Sprintf("bearer token required, %d tenants", len(tokens))
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

// Limits of a token file: a few thousand tenants, not a database.
const (
	maxTokenFileBytes = 1 << 20
	maxTokens         = 10_000
	maxTokenNameBytes = 64
)

// readTokenFile reads the tokens of --token-file: one a line, "name:token"
// or a bare token (named by its line), blank lines and '#' comments
// skipped. Errors name the file and the line, never a token.
func readTokenFile(path string) ([]server.Token, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("--token-file %s: "+format, append([]any{path}, args...)...)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fail("%w", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return nil, fail("%w", err)
	} else if !info.Mode().IsRegular() {
		return nil, fail("not a regular file (mode %s)", info.Mode().Type())
	} else if info.Size() > maxTokenFileBytes {
		return nil, fail("%d bytes, over the limit of %d", info.Size(), maxTokenFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return nil, fail("%w", err)
	}
	var tokens []server.Token
	lineOf := map[string]int{}
	names := map[string]int{}
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, secret, named := strings.Cut(line, ":")
		if !named {
			name, secret = fmt.Sprintf("%s:%d", filepath.Base(path), n), line
		}
		name, secret = strings.TrimSpace(name), strings.TrimSpace(secret)
		switch {
		case named && !validTokenName(name):
			return nil, fail("line %d: the name before ':' is 1 to %d letters, digits, '.', '_' or '-'", n, maxTokenNameBytes)
		case secret == "":
			return nil, fail("line %d: no token after the name", n)
		case lineOf[secret] != 0:
			return nil, fail("line %d repeats the token of line %d; give each tenant one token", n, lineOf[secret])
		case named && names[name] != 0:
			return nil, fail("line %d repeats the name of line %d", n, names[name])
		case len(tokens) == maxTokens:
			return nil, fail("more than %d tokens", maxTokens)
		}
		lineOf[secret], names[name] = n, n
		tokens = append(tokens, server.Token{Name: name, Secret: secret})
	}
	if len(tokens) == 0 {
		return nil, fail("no token in it; write one a line, \"name:token\" or a bare token")
	}
	return tokens, nil
}

func validTokenName(name string) bool {
	if name == "" || len(name) > maxTokenNameBytes {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// serveKeyer is the keyer of the tenants: from --tenant-secret-file, or
// else from a secret made once in the cache directory, so that a restarted
// server finds its tenants' sessions again.
func serveKeyer(a *app, path string) (*tenant.Keyer, error) {
	if path != "" {
		k, err := tenant.LoadKeyer(path)
		if err != nil {
			return nil, withCode(ExitInput, fmt.Errorf("--tenant-secret-file: %w", err))
		}
		return k, nil
	}
	base := a.cfg.CacheDir
	if base == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			a.note("warning: no cache directory for the tenant secret (%v): tenants' sessions are this process's only; set --tenant-secret-file", err)
			return tenant.NewRandomKeyer(), nil
		}
		base = filepath.Join(dir, "compact-host")
	}
	path = filepath.Join(base, "serve-tenant-secret")
	if err := makeSecretFile(path); err != nil {
		a.note("warning: the tenant secret %s cannot be made (%v): tenants' sessions are this process's only; set --tenant-secret-file", path, err)
		return tenant.NewRandomKeyer(), nil
	}
	k, err := tenant.LoadKeyer(path)
	if err != nil {
		return nil, withCode(ExitInput, fmt.Errorf("tenant secret: %w; remove the file to make a new one (sessions kept with the old one are lost) or set --tenant-secret-file", err))
	}
	return k, nil
}

// makeSecretFile writes 32 random bytes, in hex, to path unless it
// exists. The file is written aside and linked into place, so that of
// two servers starting at once one makes it and the other reads it
// whole.
func makeSecretFile(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".serve-tenant-secret-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // crypto/rand does not fail on supported platforms
	if _, err := f.WriteString(hex.EncodeToString(secret) + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Link(f.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
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
