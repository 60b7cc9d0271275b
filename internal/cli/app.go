package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/provider"
	"github.com/compact-host/compact-host/internal/sessionio"
	"github.com/spf13/cobra"
)

// engineFlags are the flags that shape the engine, shared by the commands
// that build one. Zero values leave the config file's settings alone.
type engineFlags struct {
	model          string
	contextWindow  int
	maxOutput      int
	tokenizer      string
	strategy       string
	pluginsDir     string
	providerKind   string
	baseURL        string
	compactModel   string
	keepRecent     int
	summaryTokens  int
	disableBuiltin bool
}

func addEngineFlags(cmd *cobra.Command, f *engineFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "the agent's model; its window and output limit come from the catalog (e.g. claude-sonnet-4-5, gpt-4o)")
	fl.IntVar(&f.contextWindow, "context-window", 0, "context window in tokens, overriding the model's")
	fl.IntVar(&f.maxOutput, "max-output-tokens", 0, "tokens reserved for the reply (default: the model's output limit)")
	fl.StringVar(&f.tokenizer, "tokenizer", "", "token counting: auto, chars, o200k or cl100k")
	fl.StringVar(&f.strategy, "strategy", "", "summarization strategy: structured (default), narrative, truncate, or a plugin's name")
	fl.StringVar(&f.pluginsDir, "plugins-dir", "", "directory of plugins (*.wasm, *.plugin.json); default $COMPACT_HOST_PLUGINS_DIR or <user config dir>/compact-host/plugins")
	fl.StringVar(&f.providerKind, "provider", "", "model for summaries: anthropic, openai (any OpenAI-compatible server with --base-url) or none; default: from the config, or the API key found in the environment")
	fl.StringVar(&f.baseURL, "base-url", "", "provider base URL, e.g. http://localhost:11434/v1 for Ollama")
	fl.StringVar(&f.compactModel, "compaction-model", "", "a separate, cheaper model for summaries (default: --model)")
	fl.IntVar(&f.keepRecent, "keep-recent", 0, "tokens of the newest history kept verbatim (default: a quarter of the budget, at most 40,000)")
	fl.IntVar(&f.summaryTokens, "summary-tokens", 0, "summary size to ask for, in tokens")
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
	a := &app{g: g, cfg: cfg, flags: f, log: slog.New(slog.NewTextHandler(g.io.Err, &slog.HandlerOptions{Level: lv}))}
	return a, nil
}

// progress prints a line on stderr when it is a terminal.
func (a *app) progress(format string, args ...any) {
	if a.g.io.ErrIsTerminal {
		fmt.Fprintf(a.g.io.Err, format+"\n", args...)
	}
}

// note prints a line on stderr always: things a user must know.
func (a *app) note(format string, args ...any) {
	fmt.Fprintf(a.g.io.Err, format+"\n", args...)
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
		ContextWindow:      pick(f.contextWindow, c.ContextWindow),
		MaxOutputTokens:    pick(f.maxOutput, c.MaxOutputTokens),
		Tokenizer:          pick(f.tokenizer, c.Tokenizer),
		Strategy:           pick(f.strategy, c.Strategy),
		Fallbacks:          c.Fallbacks,
		KeepRecentTokens:   pick(f.keepRecent, c.KeepRecent),
		SummaryTokens:      pick(f.summaryTokens, c.SummaryTokens),
		PruneThreshold:     c.Thresholds.Prune,
		CompactThreshold:   c.Thresholds.Compact,
		OverheadReserve:    c.Thresholds.OverheadReserve,
		EmergencyThreshold: c.Thresholds.Emergency,
		DisableCompaction:  c.Thresholds.Disable,
		ToolOutputTokens:   c.Tools.OutputLimit,
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

// model builds the provider client, or nil to run offline. It says once,
// plainly, when it runs offline.
func (a *app) model(agentModel string) (provider.Client, error) {
	c, f := a.cfg.Provider, a.flags
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
	if kind == "" || kind == "none" {
		a.offline = "note: no model configured (set ANTHROPIC_API_KEY or OPENAI_API_KEY, or --provider): summarizing offline"
		return nil, nil
	}
	keyEnv := c.APIKeyEnv
	if keyEnv == "" {
		keyEnv = map[string]string{provider.KindAnthropic: "ANTHROPIC_API_KEY", provider.KindOpenAI: "OPENAI_API_KEY"}[kind]
	}
	model := pick(c.Model, agentModel)
	cl, err := provider.New(provider.Config{
		Kind: kind, BaseURL: baseURL, APIKey: getenv(keyEnv), Model: model,
		CompactionModel: pick(f.compactModel, c.CompactionModel), Timeout: c.Timeout.Duration, MaxRetries: c.MaxRetries,
	})
	if errors.Is(err, provider.ErrNoKey) {
		a.offline = fmt.Sprintf("note: provider %s has no API key (set %s): summarizing offline", kind, keyEnv)
		return nil, nil
	}
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	return cl, nil
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
		m, err := a.model(hc.Model)
		if err != nil {
			return nil, err
		}
		if m != nil {
			opts = append(opts, host.WithModel(m))
		}
	}
	e, err := host.New(hc, opts...)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	return e, nil
}

// input is a session read from a file or stdin.
type input struct {
	path string // "-" for stdin
	*sessionio.Input
}

// loadInput reads path ("-" or "" for stdin) into a session of e. With
// appendLog, a session log is opened for appending, so what the engine
// does to the session lands in the file as it happens.
func (a *app) loadInput(e *host.Engine, path, format string, appendLog bool) (*input, error) {
	if path == "" {
		path = "-"
	}
	var r io.Reader = a.g.io.In
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, withCode(ExitInput, err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, withCode(ExitInput, fmt.Errorf("read %s: %w", displayPath(path), err))
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
	in, err := sessionio.Read(e, displayPath(path), data, format)
	if err != nil {
		return nil, withCode(ExitInput, err)
	}
	for _, w := range in.Warnings {
		a.note("warning: %s", w)
	}
	return &input{path: path, Input: in}, nil
}
