package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
	sdk "github.com/compact-host/compact-host/sdk/core"
)

// Source says how a plugin runs.
type Source string

// Sources of a Plugin.
const (
	SourceBuiltin   Source = "builtin"   // an embedded wasm module
	SourceWasm      Source = "wasm"      // a .wasm file
	SourceProcess   Source = "process"   // a go-plugin process from a manifest
	SourceInProcess Source = "inprocess" // an *sdk.Plugin linked into the host
)

// DefaultCallTimeout bounds a call whose context has no deadline.
const DefaultCallTimeout = 2 * time.Minute

// OfflineServices is the Services of a host without a model: Complete
// answers abi.CodeNoModel, CountTokens estimates four bytes a token.
type OfflineServices = pluginapi.Offline

// Plugin is a loaded plugin, whatever its transport. It is safe for
// concurrent use; every call takes the Services it may use, so one loaded
// plugin serves engines with different models.
type Plugin struct {
	info    abi.Info
	path    string
	source  Source
	timeout time.Duration
	logger  *slog.Logger
	limits  Options // the completion limits

	// Exactly one of rt and inproc is set.
	rt     pluginapi.Conn
	inproc *sdk.Plugin

	// calls hold mu for reading; Close takes it for writing, so it waits
	// for the calls in flight and refuses later ones.
	mu      sync.RWMutex
	closed  bool
	onClose func()
}

// Info is what the plugin says about itself.
func (p *Plugin) Info() abi.Info { return p.info }

// Name is the plugin's name from its Info.
func (p *Plugin) Name() string { return p.info.Name }

// Path is where the plugin was loaded from; empty for built-in and
// in-process plugins.
func (p *Plugin) Path() string { return p.path }

// Source says how the plugin runs.
func (p *Plugin) Source() Source { return p.source }

// Summarize asks a strategy plugin to summarize. svc answers the plugin's
// model and token-count calls; nil means OfflineServices. Failures are
// *Error values; the request is never modified.
func (p *Plugin) Summarize(ctx context.Context, svc Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	var resp abi.SummarizeResponse
	if err := p.call(ctx, svc, abi.ExportSummarize, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Truncate asks a truncator plugin to shorten one tool output. svc is as
// for Summarize. An unsupported category is an ErrPluginError whose
// *abi.Error has code abi.CodeUnsupported.
func (p *Plugin) Truncate(ctx context.Context, svc Services, req *abi.TruncateRequest) (*abi.TruncateResponse, error) {
	var resp abi.TruncateResponse
	if err := p.call(ctx, svc, abi.ExportTruncate, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

func (p *Plugin) call(ctx context.Context, svc Services, export string, req, resp any) error {
	op := pluginapi.OpName(export)
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return p.locate(&Error{Kind: ErrClosed, Op: op})
	}
	ctx, services, done := p.begin(ctx, svc)
	defer done()
	if p.inproc != nil {
		return p.locate(p.callInProcess(ctx, services, export, req, resp))
	}
	frame, err := abi.Encode(req)
	if err != nil {
		return p.locate(&Error{Kind: ErrPluginError, Op: op, Err: abi.Errorf(abi.CodeInvalidRequest, "%v", err)})
	}
	out, err := p.rt.Call(ctx, services, export, frame)
	if err != nil {
		return p.locate(err)
	}
	return p.locate(decodeAnswer(op, out, resp))
}

// decodeAnswer decodes an answer frame, telling the plugin's own error
// frames from garbage.
func decodeAnswer(op string, out []byte, resp any) error {
	err := abi.Decode(out, resp)
	if err == nil {
		return nil
	}
	var abiErr *abi.Error
	if errors.As(err, &abiErr) {
		return &Error{Kind: ErrPluginError, Op: op, Err: abiErr}
	}
	return &Error{Kind: ErrMalformedOutput, Op: op, Err: err}
}

// begin sets up one call: its deadline, its Services within the limits on
// completions, and its budget of log lines, whose note of what was
// dropped done logs.
func (p *Plugin) begin(ctx context.Context, svc Services) (context.Context, pluginapi.Services, func()) {
	var services pluginapi.Services = OfflineServices{}
	if svc != nil {
		services = svc
	}
	cancel := func() {}
	if _, ok := ctx.Deadline(); !ok && p.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
	}
	budget := pluginapi.NewCallLogBudget()
	ctx = pluginapi.WithLogBudget(ctx, budget)
	return ctx, p.limits.callServices(services), func() {
		cancel()
		budget.Flush(p.logger.With("plugin", p.info.Name, "path", p.path))
	}
}

func (p *Plugin) locate(err error) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if !errors.As(err, &pe) {
		err = &Error{Kind: ErrPluginError, Op: "call", Err: err}
	}
	return pluginapi.Located(err, p.info.Name, p.path)
}

// Close stops the plugin once the calls in flight have returned; later
// calls fail with ErrClosed. Close is idempotent.
func (p *Plugin) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.onClose != nil {
		p.onClose()
	}
	return nil
}

// Options configure plugin loading. The zero value is valid and means the
// defaults documented on each field.
type Options struct {
	// PluginsDir is the Registry's directory of user plugins. Empty means
	// $COMPACT_HOST_PLUGINS_DIR, or else os.UserConfigDir()/compact-host/plugins.
	PluginsDir string
	// CacheDir keeps compiled wasm modules across runs, and in its
	// plugin-info folder what each process plugin said about itself, by
	// the content hash of its manifest and executable, so that a known
	// process plugin is not started until it is used. Empty means
	// os.UserCacheDir()/compact-host/wazero.
	CacheDir string
	// NoDiskCache keeps compiled modules and process plugins' Info in
	// memory only.
	NoDiskCache bool
	// Logger receives load reports and the plugins' own log lines.
	// Nil discards them.
	Logger *slog.Logger
	// MemoryLimitBytes bounds a wasm instance's memory; zero means 256 MiB.
	MemoryLimitBytes uint64
	// MaxOutputBytes bounds one answer; zero means 64 MiB.
	MaxOutputBytes int
	// MaxFileBytes bounds a .wasm file, and a process plugin's executable
	// (which is hashed to cache its Info); zero means DefaultMaxFileBytes.
	// Manifests are bounded by MaxManifestBytes. Only regular files (or
	// symlinks to them) are read: a FIFO or a device is refused.
	MaxFileBytes int64
	// MaxInstances bounds a wasm plugin's instances, so its concurrent
	// calls; zero means GOMAXPROCS, at least 2.
	MaxInstances int
	// CallTimeout bounds a call whose context has no deadline; zero
	// means DefaultCallTimeout, negative means no bound.
	CallTimeout time.Duration
	// HandshakeTimeout bounds a process plugin's start, and then its Info
	// call; zero means 10s.
	HandshakeTimeout time.Duration
	// MaxCompletionsPerCall bounds the model completions one plugin call
	// may ask the host for (they are paid on the user's key); past it the
	// host answers an error. Zero means DefaultMaxCompletionsPerCall.
	MaxCompletionsPerCall int
	// MaxCompletionTokens clamps the max_tokens of a plugin's completion;
	// Services that implement OutputLimiter clamp it further to their
	// model's output limit. Zero means DefaultMaxCompletionTokens.
	MaxCompletionTokens int
	// Wasm runs .wasm plugins and the built-ins: wasm.Runtime, from
	// package host/plugin/wasm. Nil refuses .wasm files (ErrNoRuntime).
	Wasm WasmRuntime
	// Process starts process plugins from their manifests:
	// process.Runtime, from package host/plugin/process. Nil refuses
	// manifests (ErrNoRuntime).
	Process ProcessRuntime
	// Builtins are the plugins a Registry holds before the plugins
	// directory's, each loaded by Wasm on its first use and replaced by
	// a user plugin of its name: wasm.Builtins. Nil means none.
	Builtins Builtins
	// NoWatch turns off watching the plugins directory.
	NoWatch bool
	// WatchDebounce is how long the directory must be quiet before a
	// changed file is reloaded; zero means 250ms.
	WatchDebounce time.Duration
}

// EnvPluginsDir names the environment variable that overrides the default
// plugins directory.
const EnvPluginsDir = "COMPACT_HOST_PLUGINS_DIR"

// logger is the logger of the runtimes: a plugin's lines logged during a
// call count against the call's budget.
func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return pluginapi.BudgetLogger(o.Logger)
}

func (o Options) callTimeout() time.Duration {
	switch {
	case o.CallTimeout == 0:
		return DefaultCallTimeout
	case o.CallTimeout < 0:
		return 0
	}
	return o.CallTimeout
}

// pluginsDir resolves PluginsDir.
func (o Options) pluginsDir() (string, error) {
	if o.PluginsDir != "" {
		return o.PluginsDir, nil
	}
	if dir := os.Getenv(EnvPluginsDir); dir != "" {
		return dir, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("plugin: no plugins directory: %w", err)
	}
	return filepath.Join(dir, "compact-host", "plugins"), nil
}

// cacheDir resolves CacheDir; empty with NoDiskCache or when the user
// has no cache directory.
func (o Options) cacheDir() string {
	if o.NoDiskCache {
		return ""
	}
	if o.CacheDir != "" {
		return o.CacheDir
	}
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "compact-host", "wazero")
	}
	return ""
}

// WasmRuntime makes the engine that loads wasm plugins; package
// host/plugin/wasm's Runtime is the one there is.
type WasmRuntime = pluginapi.WasmRuntime

// ProcessRuntime starts a process plugin; package host/plugin/process's
// Runtime is the one there is.
type ProcessRuntime = pluginapi.ProcessRuntime

// Builtins are plugins embedded in the binary as wasm modules; package
// host/plugin/wasm's Builtins are the project's.
type Builtins = pluginapi.Builtins

// wasmEngine makes an engine of the wasm runtime, or nil without one.
func (o Options) wasmEngine() (pluginapi.WasmEngine, error) {
	if o.Wasm == nil {
		return nil, nil
	}
	return o.Wasm(pluginapi.WasmConfig{
		CacheDir:         o.cacheDir(),
		MemoryLimitBytes: o.MemoryLimitBytes,
		MaxOutputBytes:   o.MaxOutputBytes,
		MaxInstances:     o.MaxInstances,
		Logger:           o.logger(),
	})
}

// noRuntime is the error of a plugin whose runtime is not wired in.
func noRuntime(path, option string) error {
	return &Error{Kind: ErrNoRuntime, Plugin: nameFromPath(path), Path: path, Op: "load",
		Err: fmt.Errorf("plugin.Options.%s is not set", option)}
}

// OpenWasm loads a wasm plugin from its bytes with opts.Wasm (else an
// ErrNoRuntime error). path names it in errors and logs and may be empty.
// The plugin has its own compilation cache handle; load many plugins
// through a Registry to share one.
func OpenWasm(ctx context.Context, bin []byte, path string, opts Options) (*Plugin, error) {
	engine, err := opts.wasmEngine()
	if err != nil {
		return nil, err
	}
	if engine == nil {
		return nil, noRuntime(path, "Wasm")
	}
	p, err := loadWasm(ctx, engine, bin, path, SourceWasm, opts)
	if err != nil {
		engine.Close(context.Background())
		return nil, err
	}
	closeModule := p.onClose
	p.onClose = func() {
		closeModule()
		engine.Close(context.Background())
	}
	return p, nil
}

// loadWasm loads a wasm plugin, a built-in or not: all run under the same
// limits. Loading runs the module's start code and its info export, so a
// context without a deadline gets the call timeout: a plugin that loops
// there must not hang the load.
func loadWasm(ctx context.Context, engine pluginapi.WasmEngine, bin []byte, path string, source Source, opts Options) (*Plugin, error) {
	if _, ok := ctx.Deadline(); !ok && opts.callTimeout() > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.callTimeout())
		defer cancel()
	}
	mod, err := engine.Load(ctx, path, bin)
	if err != nil {
		return nil, pluginapi.Located(err, nameFromPath(path), path)
	}
	return &Plugin{info: mod.Info(), path: path, source: source, timeout: opts.callTimeout(),
		logger: opts.logger(), limits: opts, rt: mod, onClose: mod.Close}, nil
}

// OpenWasmFile loads a wasm plugin from a file.
func OpenWasmFile(ctx context.Context, path string, opts Options) (*Plugin, error) {
	bin, err := readRegular(path, opts.maxFileBytes(), "plugin.Options.MaxFileBytes")
	if err != nil {
		return nil, &Error{Kind: ErrInvalidPlugin, Plugin: nameFromPath(path), Path: path, Op: "load", Err: err}
	}
	return OpenWasm(ctx, bin, path, opts)
}

// StartProcess starts a process plugin described by a manifest with
// opts.Process (else an ErrNoRuntime error). The process is restarted on
// the call after a crash.
func StartProcess(ctx context.Context, m Manifest, opts Options) (*Plugin, error) {
	cfg, err := m.procConfig()
	if err != nil {
		return nil, &Error{Kind: ErrInvalidPlugin, Plugin: nameFromPath(m.Path), Path: m.Path, Op: "load", Err: err}
	}
	if opts.Process == nil {
		return nil, noRuntime(m.Path, "Process")
	}
	cfg.HandshakeTimeout = opts.HandshakeTimeout
	cfg.CallTimeout = opts.callTimeout()
	cfg.Logger = opts.logger()
	proc, err := opts.Process(ctx, cfg)
	if err != nil {
		return nil, pluginapi.Located(err, nameFromPath(m.Path), m.Path)
	}
	return &Plugin{info: proc.Info(), path: m.Path, source: SourceProcess, timeout: opts.callTimeout(),
		logger: opts.logger(), limits: opts, rt: proc, onClose: proc.Close}, nil
}

// Open loads the plugin at path: a .wasm file, or a process manifest
// (*.plugin.json). It is what `compact-host plugins verify PATH` uses.
func Open(ctx context.Context, path string, opts Options) (*Plugin, error) {
	switch {
	case strings.HasSuffix(path, ".wasm"):
		return OpenWasmFile(ctx, path, opts)
	case strings.HasSuffix(path, ManifestSuffix):
		m, err := ReadManifest(path)
		if err != nil {
			return nil, err
		}
		return StartProcess(ctx, m, opts)
	}
	return nil, &Error{Kind: ErrInvalidPlugin, Plugin: nameFromPath(path), Path: path, Op: "load",
		Err: fmt.Errorf("want a .wasm file or a %s manifest", ManifestSuffix)}
}

// InProcess wraps a plugin linked into the host. It shares the plugin's
// code with the wasm and process builds but none of their isolation: a
// panic is recovered, a loop is not. It is the baseline of the benchmarks.
func InProcess(p *sdk.Plugin, opts Options) *Plugin {
	return &Plugin{info: p.Info(), source: SourceInProcess, timeout: opts.callTimeout(), logger: opts.logger(), limits: opts, inproc: p}
}

func (p *Plugin) callInProcess(ctx context.Context, svc pluginapi.Services, export string, req, resp any) (err error) {
	op := pluginapi.OpName(export)
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Kind: ErrPluginError, Op: op, Err: abi.Errorf(abi.CodeInternal, "plugin panicked: %v", r)}
		}
	}()
	host := inProcessHost{svc: svc, logger: p.logger.With("plugin", p.info.Name)}
	fail := func(err error) error {
		if cerr := pluginapi.ContextErr(ctx); cerr != nil {
			return &Error{Kind: ErrDeadlineExceeded, Op: op, Err: cerr}
		}
		return &Error{Kind: ErrPluginError, Op: op, Err: abi.AsError(err)}
	}
	switch export {
	case abi.ExportSummarize:
		if p.inproc.Strategy == nil {
			return fail(abi.Errorf(abi.CodeUnsupported, "plugin %s is not a strategy", p.info.Name))
		}
		out, err := p.inproc.Strategy.Summarize(ctx, host, req.(*abi.SummarizeRequest))
		if err != nil {
			return fail(err)
		}
		*resp.(*abi.SummarizeResponse) = *out
	case abi.ExportTruncate:
		r := req.(*abi.TruncateRequest)
		if p.inproc.Truncator == nil || (len(p.info.Categories) > 0 && !slices.Contains(p.info.Categories, r.Category)) {
			return fail(abi.Errorf(abi.CodeUnsupported, "plugin %s does not truncate category %q", p.info.Name, r.Category))
		}
		out, err := p.inproc.Truncator.Truncate(ctx, host, r)
		if err != nil {
			return fail(err)
		}
		*resp.(*abi.TruncateResponse) = *out
	}
	return nil
}

// inProcessHost is the sdk.Host of an in-process call.
type inProcessHost struct {
	svc    pluginapi.Services
	logger *slog.Logger
}

func (h inProcessHost) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	return h.svc.Complete(ctx, req)
}

func (h inProcessHost) CountTokens(ctx context.Context, text string) (int, error) {
	return h.svc.CountTokens(ctx, text)
}

func (h inProcessHost) Log(level slog.Level, msg string) {
	h.logger.Log(context.Background(), level, msg)
}

func nameFromPath(path string) string {
	base := filepath.Base(path)
	base = strings.TrimSuffix(base, ManifestSuffix)
	return strings.TrimSuffix(base, ".wasm")
}

var _ sdk.Host = inProcessHost{}

// CallFrame sends a raw request frame to export (abi.ExportInfo,
// abi.ExportSummarize or abi.ExportTruncate) and returns the raw answer
// frame, which may be an error frame. It is for conformance checks and
// tools that test how a plugin handles bad requests; the engine uses
// Summarize and Truncate.
func (p *Plugin) CallFrame(ctx context.Context, svc Services, export string, frame []byte) ([]byte, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return nil, p.locate(&Error{Kind: ErrClosed, Op: "call"})
	}
	ctx, services, done := p.begin(ctx, svc)
	defer done()
	if p.inproc != nil {
		return p.inproc.Handle(ctx, inProcessHost{svc: services, logger: p.logger}, export, frame), nil
	}
	out, err := p.rt.Call(ctx, services, export, frame)
	return out, p.locate(err)
}
