package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/host/provider"
	"github.com/compact-host/compact-host/internal/server"
	"github.com/compact-host/compact-host/internal/sessionio"
	"github.com/compact-host/compact-host/internal/suggest"
	"github.com/compact-host/compact-host/internal/tokencount"
	"github.com/spf13/cobra"
)

// engineFlags are the flags that shape the engine, shared by the commands
// that build one. Zero values leave the config file's settings alone.
type engineFlags struct {
	model          string
	contextWindow  tokencount.Tokens
	maxOutput      tokencount.Tokens
	tokenizer      string
	strategy       string
	pluginsDir     string
	providerKind   string
	baseURL        string
	compactModel   string
	keepRecent     tokencount.Tokens
	summaryTokens  tokencount.Tokens
	disableBuiltin bool
	// offlineFallback lets a provider without its API key summarize
	// offline instead of failing.
	offlineFallback bool
	// maxInputBytes and providerTimeout: zero means the config's, then
	// the default.
	maxInputBytes   int64
	providerTimeout time.Duration
}

// addEngineFlags adds every flag of the engine: for the commands that
// summarize (compact, serve, proxy, undo).
func addEngineFlags(cmd *cobra.Command, f *engineFlags) {
	addBudgetFlags(cmd, f)
	addPluginsFlag(cmd, f)
	addStrategyFlags(cmd, f)
	addProviderFlags(cmd, f)
	addInputFlags(cmd, f)
}

// addBudgetFlags adds the flags that size the budget and count tokens.
func addBudgetFlags(cmd *cobra.Command, f *engineFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "the agent's model; its window and output limit come from the catalog (e.g. claude-sonnet-4-5, gpt-4o)")
	fl.Var(&f.contextWindow, "context-window", "context window in tokens, overriding the model's: "+tokenSyntaxHelp)
	fl.Var(&f.maxOutput, "max-output-tokens", "tokens reserved for the reply (default: the model's output limit)")
	fl.StringVar(&f.tokenizer, "tokenizer", "", "token counting: auto, chars, o200k or cl100k")
}

// tokenSyntaxHelp is how every token count is written, for --help.
var tokenSyntaxHelp = fmt.Sprintf("16000, 16_000, 16k or 1.5m, at most %s", num(tokencount.Max))

func addPluginsFlag(cmd *cobra.Command, f *engineFlags) {
	cmd.Flags().StringVar(&f.pluginsDir, "plugins-dir", "", "directory of plugins (*.wasm, *.plugin.json); default $COMPACT_HOST_PLUGINS_DIR or <user config dir>/compact-host/plugins")
}

// addStrategyFlags adds the flags of the summary and the cut.
func addStrategyFlags(cmd *cobra.Command, f *engineFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.strategy, "strategy", "", "summarization strategy: structured (default), narrative, truncate, or a plugin's name")
	fl.Var(&f.keepRecent, "keep-recent", "tokens of the newest history kept verbatim (default: a quarter of the budget, at most 40,000)")
	fl.Var(&f.summaryTokens, "summary-tokens", "summary size to ask for, in tokens")
}

// addProviderFlags adds the flags of the model that writes summaries.
func addProviderFlags(cmd *cobra.Command, f *engineFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.providerKind, "provider", "", "model for summaries: anthropic, openai (any OpenAI-compatible server with --base-url) or none; default: from the config, or the API key found in the environment")
	fl.StringVar(&f.baseURL, "base-url", "", "provider base URL, e.g. http://localhost:11434/v1 for Ollama")
	fl.StringVar(&f.compactModel, "compaction-model", "", "a separate, cheaper model for summaries (default: --model)")
	fl.DurationVar(&f.providerTimeout, "provider-timeout", 0, "bound on each attempt of a model call (default: [provider] timeout, or 2m)")
}

// addOfflineFallbackFlag adds --offline-fallback, for the commands that
// call the provider themselves (compact, serve).
func addOfflineFallbackFlag(cmd *cobra.Command, f *engineFlags) {
	cmd.Flags().BoolVar(&f.offlineFallback, "offline-fallback", false, "when the chosen provider has no API key, summarize offline instead of failing (config: provider.offline_fallback)")
}

// addInputFlags adds the flags of commands that read a file or stdin.
func addInputFlags(cmd *cobra.Command, f *engineFlags) {
	cmd.Flags().Int64Var(&f.maxInputBytes, "max-input-bytes", 0, "largest input read from a file or stdin (default: max_input_bytes, or 256 MiB)")
}

// app is what a command works with: the resolved config, a logger, and
// the engine with its plugins and model, built on first use.
type app struct {
	g     *globals
	cfg   Config
	flags engineFlags
	log   *slog.Logger

	once     sync.Once
	registry *plugin.Registry
	regErr   error
	// offline says why no model is used; sayOffline prints it once.
	offline string
	// began is when the command started: progress lines show the time
	// since.
	began time.Time
	// meter counts the model calls, once a model is built.
	meter *server.Meter
	// step is what the command is doing, for progress lines.
	step atomic.Value
	// reading is how agents' files are read (--full-history,
	// --agent-overhead).
	reading sessionio.ReadOptions
}

// sayOffline tells the user, once, that summaries are made without a model.
func (a *app) sayOffline() {
	if a.offline != "" {
		a.note("%s", a.offline)
		a.offline = ""
	}
}

func newApp(g *globals, f engineFlags) (*app, error) {
	cfg, _, err := loadConfig(g.configPath, g.io.Getenv)
	if err != nil {
		return nil, withCode(ExitInput, err)
	}
	level := cfg.LogLevel
	if g.logLevel != "" {
		level = g.logLevel
	}
	var lv slog.Level
	switch level {
	case "", "warn":
		lv = slog.LevelWarn
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "error":
		lv = slog.LevelError
	default:
		return nil, usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", level)}
	}
	a := &app{g: g, cfg: cfg, flags: f, log: slog.New(g.logHandler(lv)), began: time.Now()}
	for _, n := range g.deprecated {
		a.note("%s", n)
	}
	switch {
	case f.maxInputBytes < 0:
		return nil, usageError{fmt.Errorf("--max-input-bytes %d: want a positive byte count", f.maxInputBytes)}
	case f.providerTimeout < 0:
		return nil, usageError{fmt.Errorf("--provider-timeout %s: want a positive duration like 90s", f.providerTimeout)}
	}
	if err := a.hostConfig().Validate(); err != nil {
		return nil, a.settingError(err)
	}
	return a, nil
}

// origin says where the value of a host.Config field (or "provider."
// field) came from: a flag, the config file (or the environment), or the
// default.
func (a *app) origin(field string) origin {
	f, c := a.flags, a.cfg
	set := map[string][2]bool{
		"Model":                    {f.model != "", c.Model != ""},
		"ContextWindow":            {f.contextWindow != 0, c.ContextWindow != 0},
		"MaxOutputTokens":          {f.maxOutput != 0, c.MaxOutputTokens != 0},
		"Tokenizer":                {f.tokenizer != "", c.Tokenizer != ""},
		"Strategy":                 {f.strategy != "", c.Strategy != ""},
		"Fallbacks":                {false, c.Fallbacks != nil},
		"KeepRecentTokens":         {f.keepRecent != 0, c.KeepRecent != 0},
		"SummaryTokens":            {f.summaryTokens != 0, c.SummaryTokens != 0},
		"PruneThreshold":           {false, c.Thresholds.Prune != 0},
		"CompactThreshold":         {false, c.Thresholds.Compact != 0},
		"OverheadReserve":          {false, c.Thresholds.OverheadReserve != 0},
		"EmergencyThreshold":       {false, c.Thresholds.Emergency != 0},
		"MinSavings":               {false, c.Thresholds.MinSavings != 0},
		"ToolOutputTokens":         {false, c.Tools.OutputLimit != 0},
		"provider.Kind":            {f.providerKind != "", c.Provider.Kind != ""},
		"provider.BaseURL":         {f.baseURL != "", c.Provider.BaseURL != ""},
		"provider.Model":           {false, c.Provider.Model != ""},
		"provider.CompactionModel": {f.compactModel != "", c.Provider.CompactionModel != ""},
		"provider.Timeout":         {f.providerTimeout != 0, c.Provider.Timeout.Duration != 0},
	}[field]
	switch {
	case set[0]:
		return fromFlag
	case set[1]:
		return fromConfig
	}
	return fromDefault
}

// settingError names the flags and keys of a host.Config or
// provider.Config error, with the exit code of where the value came from.
func (a *app) settingError(err error) error {
	var pe *provider.ConfigError
	prefix := ""
	if errors.As(err, &pe) {
		prefix = "provider."
	}
	return settingError(err, prefix, a.origin, a.cfg.src)
}

// progress prints a line on stderr when it is a terminal, with the time
// since the command started.
func (a *app) progress(format string, args ...any) {
	if a.g.io.ErrIsTerminal {
		a.g.sayProgress(time.Since(a.began), fmt.Sprintf(format, args...))
	}
}

// setStep records what the command does now; model calls and retries
// are reported as part of it.
func (a *app) setStep(step string) { a.step.Store(step) }

func (a *app) stepName() string {
	s, _ := a.step.Load().(string)
	return s
}

// note prints a line on stderr always: things a user must know.
func (a *app) note(format string, args ...any) {
	a.g.say(fmt.Sprintf(format, args...))
}

func pick[T comparable](flag, cfg T) T {
	var zero T
	if flag != zero {
		return flag
	}
	return cfg
}

// hostConfig merges flags over the config file.
func (a *app) hostConfig() host.Config {
	c, f := a.cfg, a.flags
	hc := host.Config{
		Model:              pick(f.model, c.Model),
		ContextWindow:      int(pick(f.contextWindow, c.ContextWindow)),
		MaxOutputTokens:    int(pick(f.maxOutput, c.MaxOutputTokens)),
		Tokenizer:          pick(f.tokenizer, c.Tokenizer),
		Strategy:           pick(f.strategy, c.Strategy),
		Fallbacks:          c.Fallbacks,
		KeepRecentTokens:   int(pick(f.keepRecent, c.KeepRecent)),
		SummaryTokens:      int(pick(f.summaryTokens, c.SummaryTokens)),
		PruneThreshold:     c.Thresholds.Prune,
		CompactThreshold:   c.Thresholds.Compact,
		OverheadReserve:    c.Thresholds.OverheadReserve,
		EmergencyThreshold: c.Thresholds.Emergency,
		MinSavings:         c.Thresholds.MinSavings,
		DisableCompaction:  c.Thresholds.Disable,
		ToolOutputTokens:   int(c.Tools.OutputLimit),
		ToolCategories:     c.Tools.Categories,
		FileTools:          host.FileTools{Read: c.Tools.Read, Modify: c.Tools.Modify},
	}
	if hc.Model == "" && hc.ContextWindow == 0 {
		hc.Model = defaultModel
	}
	return hc
}

// defaultModel sizes the budget when neither a model nor a window is given.
const defaultModel = "claude-sonnet-4-5"

// pluginOptions are the registry options from flags and config.
func (a *app) pluginOptions(watch bool) plugin.Options {
	opts := plugin.Options{
		PluginsDir: pick(a.flags.pluginsDir, a.cfg.PluginsDir),
		Logger:     a.log,
		NoWatch:    !watch,
		// Every runtime, and the built-ins as wasm so a fresh install works.
		Wasm:     wasm.Runtime,
		Builtins: wasm.Builtins,
		Process:  process.Runtime,
	}
	if a.cfg.CacheDir != "" {
		opts.CacheDir = filepath.Join(a.cfg.CacheDir, "wazero")
	}
	return opts
}

// plugins opens the plugin registry once.
func (a *app) plugins(ctx context.Context, watch bool) (*plugin.Registry, error) {
	a.once.Do(func() {
		a.registry, a.regErr = plugin.NewRegistry(ctx, a.pluginOptions(watch))
		if a.regErr != nil {
			a.regErr = withCode(ExitPlugin, a.regErr)
		}
	})
	return a.registry, a.regErr
}

func (a *app) close() {
	if a.registry != nil {
		a.registry.Close()
	}
}

// defaultProviderTimeout bounds each attempt of a model call unless
// --provider-timeout or provider.timeout says otherwise.
const defaultProviderTimeout = provider.DefaultTimeout

// model builds the provider client, or nil to run offline. It says once,
// plainly, when it runs offline. The client is metered (a.meter), and
// its retries show as progress lines.
func (a *app) model() (host.ModelClient, error) {
	c, f := a.cfg.Provider, a.flags
	agentModel := pick(f.model, a.cfg.Model)
	kind := pick(f.providerKind, c.Kind)
	baseURL := pick(f.baseURL, c.BaseURL)
	getenv := a.g.io.Getenv
	if kind == "" {
		// No provider chosen: use the one whose key the environment holds.
		switch {
		case getenv("ANTHROPIC_API_KEY") != "":
			kind = provider.KindAnthropic
		case getenv("OPENAI_API_KEY") != "" || baseURL != "":
			kind = provider.KindOpenAI
		}
	}
	switch kind {
	case "", "none", provider.KindAnthropic, provider.KindOpenAI:
	default:
		return nil, a.usageOrConfig("provider.Kind", fmt.Errorf("%s %q: want anthropic, openai or none%s",
			settingName("provider.Kind", a.origin("provider.Kind")), kind, suggest.Hint(kind, []string{"anthropic", "openai", "none"})))
	}
	if kind == "" || kind == "none" {
		a.offline = "note: no model configured (set ANTHROPIC_API_KEY or OPENAI_API_KEY, or --provider): summarizing offline"
		return nil, nil
	}
	keyEnv := c.APIKeyEnv
	if keyEnv == "" {
		keyEnv = map[string]string{provider.KindAnthropic: "ANTHROPIC_API_KEY", provider.KindOpenAI: "OPENAI_API_KEY"}[kind]
	}
	// The model summaries are asked of: the compaction model, else the
	// provider's, else the agent's when the user named one, else the
	// provider's public default. A compatible server has no default.
	model := pick(pick(f.compactModel, c.CompactionModel), pick(c.Model, agentModel))
	if model == "" {
		switch {
		case kind == provider.KindAnthropic:
			model = provider.DefaultAnthropicModel
		case baseURL == "" || strings.Contains(baseURL, "api.openai.com"):
			model = provider.DefaultOpenAIModel
		default:
			return nil, a.usageOrConfig("provider.CompactionModel", fmt.Errorf(
				"%s at %s needs a model for summaries: set --compaction-model (or provider.compaction_model in the config) to one the server serves",
				settingName("provider.Kind", a.origin("provider.Kind"))+" "+kind, baseURL))
		}
	}
	timeout, retries := a.providerLimits()
	cl, err := provider.New(provider.Config{
		Kind: kind, BaseURL: baseURL, APIKey: getenv(keyEnv), Model: model,
		Timeout: timeout, MaxRetries: retries,
		OnRetry: func(r provider.Retry) {
			a.progress("%s: model call attempt %d of %d failed (%v); retrying in %.1fs", a.stepName(), r.Attempt, r.MaxAttempts, r.Err, r.Wait.Seconds())
		},
	})
	if errors.Is(err, provider.ErrNoKey) {
		if f.offlineFallback || c.OfflineFallback {
			a.offline = fmt.Sprintf("note: provider %s has no API key (set %s): summarizing offline", kind, keyEnv)
			return nil, nil
		}
		return nil, a.usageOrConfig("provider.Kind", fmt.Errorf(
			"%s %s: no API key: set %s, or pass --offline-fallback (config provider.offline_fallback = true) to summarize offline without one",
			settingName("provider.Kind", a.origin("provider.Kind")), kind, keyEnv))
	}
	if err != nil {
		return nil, a.settingError(err)
	}
	a.meter = server.NewMeter(cl)
	a.meter.OnCall = func(n int) {
		a.progress("%s: model call %d to %s (each attempt bounded by %s)", a.stepName(), n, cl.Model(),
			pick(pick(f.providerTimeout, c.Timeout.Duration), defaultProviderTimeout))
	}
	return a.meter, nil
}

// providerLimits are the bound on each attempt of a model call and the
// retries of a failed one, in provider.Config's terms, for every command
// that calls a model (the proxy's summary calls included).
func (a *app) providerLimits() (timeout time.Duration, retries int) {
	c := a.cfg.Provider
	retries = provider.DefaultMaxRetries
	if c.MaxRetries != nil {
		retries = *c.MaxRetries
		if retries == 0 {
			retries = -1 // provider.Config's "no retries"
		}
	}
	return pick(a.flags.providerTimeout, c.Timeout.Duration), retries
}

// usageOrConfig is err as a usage error (exit 2) when field was set by a
// flag or not at all, as a config error (exit 3) when by the config file.
func (a *app) usageOrConfig(field string, err error) error {
	if a.origin(field) == fromConfig {
		return a.cfg.src.errorAt(settings[field].key, err.Error())
	}
	return usageError{err}
}

// engine builds the engine with the registry's strategies and the model.
func (a *app) engine(ctx context.Context, withModel bool) (*host.Engine, error) {
	hc := a.hostConfig()
	reg, err := a.plugins(ctx, false)
	if err != nil {
		return nil, err
	}
	opts := []host.Option{host.WithLogger(a.log), host.WithPlugins(reg)}
	if withModel {
		m, err := a.model()
		if err != nil {
			return nil, err
		}
		if m != nil {
			opts = append(opts, host.WithModel(m))
		}
	}
	e, err := host.New(hc, opts...)
	if err != nil {
		return nil, a.settingError(err)
	}
	if err := a.checkStrategies(ctx, reg, hc); err != nil {
		return nil, err
	}
	return e, nil
}

// checkStrategies refuses a strategy or fallback that no plugin provides,
// before any work: the engine would fall back from it silently.
func (a *app) checkStrategies(ctx context.Context, reg *plugin.Registry, hc host.Config) error {
	check := func(field, name string) error {
		_, err := reg.Strategy(ctx, name)
		if err == nil || !errors.Is(err, plugin.ErrNotFound) {
			return nil // a broken plugin fails, and falls back, when used
		}
		names := server.StrategyNames(ctx, reg)
		msg := fmt.Errorf("%s %q: no plugin provides this strategy; the strategies are %s%s",
			settingName(field, a.origin(field)), name, strings.Join(names, ", "), suggest.Hint(name, names))
		if a.origin(field) == fromConfig {
			return a.cfg.src.errorAt(settings[field].key, msg.Error())
		}
		return usageError{msg}
	}
	if hc.Strategy != "" {
		if err := check("Strategy", hc.Strategy); err != nil {
			return err
		}
	}
	for _, f := range hc.Fallbacks {
		if err := check("Fallbacks", f); err != nil {
			return err
		}
	}
	return nil
}

// input is a session read from a file or stdin.
type input struct {
	path string // "-" for stdin
	*sessionio.Input
}

// loadInput reads path ("-" or "" for stdin) into a session of e. With
// appendLog, a session log is opened for appending, so what the engine
// does to the session lands in the file as it happens.
func (a *app) loadInput(ctx context.Context, e *host.Engine, path, format string, appendLog bool) (*input, error) {
	if path == "" {
		path = "-"
	}
	data, err := a.readInput(ctx, path)
	if err != nil {
		return nil, err
	}
	if appendLog && path != "-" && (format == "" || format == formats.Canonical) && host.IsSessionLog(data) {
		s, err := e.OpenSession(path)
		if err != nil {
			return nil, withCode(ExitInput, err)
		}
		if t := s.Torn(); t != nil {
			a.note("warning: %s: %s", path, t)
		}
		return &input{path: path, Input: &sessionio.Input{Session: s, Format: formats.Canonical, Log: true}}, nil
	}
	in, err := sessionio.ReadWith(e, displayPath(path), data, format, a.reading)
	if err != nil {
		return nil, withCode(ExitInput, err)
	}
	for _, w := range in.Warnings {
		a.note("warning: %s", w)
	}
	return &input{path: path, Input: in}, nil
}
