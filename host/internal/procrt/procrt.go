// Package procrt runs process plugins with hashicorp/go-plugin over gRPC:
// one process per plugin, started with a bounded handshake, optionally
// pinned to a SHA-256 checksum, restarted on the call after a crash.
package procrt

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
	"github.com/compact-host/compact-host/sdk/grpcwire"
)

// DefaultHandshakeTimeout bounds the start of a plugin process: the
// go-plugin handshake, and then its Info call.
const DefaultHandshakeTimeout = 10 * time.Second

// DefaultCallTimeout bounds a call whose context has no deadline.
const DefaultCallTimeout = 2 * time.Minute

// Config says how to start a process plugin: the runtime's side of
// plugin.Options, one type with it so the two cannot drift apart. A zero
// HandshakeTimeout means DefaultHandshakeTimeout and a zero CallTimeout
// DefaultCallTimeout; a nil Logger discards.
type Config = pluginapi.ProcessConfig

// Plugin is a running process plugin. It is safe for concurrent use.
type Plugin struct {
	cfg  Config
	info abi.Info

	mu     sync.Mutex
	proc   *process
	closed bool
}

// process is one run of the plugin's executable.
type process struct {
	client *plugin.Client
	wire   *grpcwire.Client
	// pgid is the process group the plugin and every child it starts
	// run in, so that killing the plugin kills them too.
	pgid int
	// stderr logs the process's stderr, syncOut and syncErr what it
	// writes to os.Stdout and os.Stderr once it serves.
	stderr           *slogWriter
	syncOut, syncErr *pluginapi.LineWriter
	// tail keeps the end of the raw stderr, for the error of a plugin
	// that fails before its handshake.
	tail *stderrTail
	// cancel ends the context the process was started with, which
	// kills its group.
	cancel context.CancelFunc
}

// Start starts the process, completes the handshake and asks for Info.
func Start(ctx context.Context, cfg Config) (*Plugin, error) {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Plugin{cfg: cfg}
	if _, err := p.conn(ctx); err != nil {
		return nil, err
	}
	// Info answers at once from any honest plugin; one that does not is
	// stopped at the handshake timeout, so that a registry loading it does
	// not hang whatever waits for the registry.
	ctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	out, err := p.Call(ctx, nil, abi.ExportInfo, nil)
	if err != nil {
		p.Close()
		return nil, err
	}
	if err := abi.Decode(out, &p.info); err != nil {
		p.Close()
		return nil, p.errorf(pluginapi.ErrMalformedOutput, "info", "%w", err)
	}
	if p.info.ABIMajor != abi.Major {
		p.Close()
		return nil, p.errorf(pluginapi.ErrVersionMismatch, "info", "%w", &pluginapi.VersionError{Want: p.info.ABIMajor, Have: abi.Major})
	}
	return p, nil
}

// Info is what the plugin said about itself at start.
func (p *Plugin) Info() abi.Info { return p.info }

func (p *Plugin) errorf(kind error, op, format string, args ...any) error {
	return &pluginapi.Error{Kind: kind, Op: op, Path: p.cfg.Command, Err: fmt.Errorf(format, args...)}
}

// conn returns the live connection, starting the process if there is
// none: at the first call, or after a crash. ctx ending while the process
// starts kills it.
func (p *Plugin) conn(ctx context.Context) (*process, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, p.errorf(pluginapi.ErrClosed, "call", "closed")
	}
	if p.proc != nil && !p.proc.client.Exited() {
		return p.proc, nil
	}
	if p.proc != nil {
		p.cfg.Logger.Warn("plugin process exited; restarting", "path", p.cfg.Command)
		p.proc.kill()
		p.proc = nil
	}
	proc, err := p.start(ctx)
	if err != nil {
		return nil, err
	}
	p.proc = proc
	return proc, nil
}

var pluginVersionRE = regexp.MustCompile(`Plugin version: (\d+)`)

// goPluginStartTimeout is the text of go-plugin's error when a plugin does
// not print its handshake line within StartTimeout; go-plugin has no
// typed error for it.
const goPluginStartTimeout = "timeout while waiting for plugin to start"

// goPluginBadHandshake starts go-plugin's error when the plugin's first
// line on stdout is not a handshake, or there is none.
const goPluginBadHandshake = "Unrecognized remote plugin message: "

// maxStderrTail bounds the end of a plugin's stderr kept for its error.
const maxStderrTail = 2 << 10

// stderrTail keeps the last maxStderrTail bytes a plugin wrote to stderr.
type stderrTail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - maxStderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// text is "; its stderr ended with:" and the tail's lines, indented, as
// the plugin wrote them but for what could forge a line or drive a
// terminal (pluginapi.Escape, line by line); "" when it wrote nothing.
func (t *stderrTail) text() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(t.buf) >= maxStderrTail && len(lines) > 1 {
		lines[0] = "…" // a partial line
	}
	for i, l := range lines {
		lines[i] = pluginapi.Escape(strings.TrimRight(l, "\r"))
	}
	return "; its stderr ended with:\n    " + strings.Join(lines, "\n    ")
}

// attach returns err with the tail after its text, one line per line.
// pluginapi.Error escapes its whole text, newlines included, so the tail
// goes beside it rather than inside.
func (t *stderrTail) attach(err error) error {
	var pe *pluginapi.Error
	tail := t.text()
	if tail == "" || !errors.As(err, &pe) {
		return err
	}
	return &startError{err: pe, tail: tail}
}

// startError is a start failure with the plugin's stderr tail.
type startError struct {
	err  *pluginapi.Error
	tail string
}

func (e *startError) Error() string { return e.err.Error() + e.tail }
func (e *startError) Unwrap() error { return e.err }

func (p *Plugin) start(ctx context.Context) (*process, error) {
	protectHost(p.cfg.Logger)
	// go-plugin's handshake wait takes no context, and its Kill waits for
	// the handshake to end: the process's own context is the one way to
	// stop a process that hangs there when the caller gives up (the
	// registry closing, serve stopping). It lives as long as the process;
	// the caller's context only reaches it until the handshake is done.
	procCtx, procCancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(procCtx, p.cfg.Command, p.cfg.Args...)
	cmd.Cancel = func() error {
		killGroup(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		return nil
	}
	// go-plugin reads the whole executable to check its checksum: a
	// device or a FIFO there would never end the read.
	if info, err := os.Stat(cmd.Path); err == nil && !info.Mode().IsRegular() {
		procCancel()
		return nil, p.errorf(pluginapi.ErrInvalidPlugin, "start", "%s is not a regular file (mode %s)", cmd.Path, info.Mode().Type())
	}
	cmd.Dir = p.cfg.Dir
	// The host's environment holds provider API keys; a plugin gets only
	// what it needs to run.
	cmd.Env = minimalEnv()
	setProcessGroup(cmd)
	logger := p.cfg.Logger.With("path", p.cfg.Command)
	stderr := &slogWriter{logger: logger, budget: pluginapi.NewStreamLogBudget()}
	// go-plugin's Serve sends what the plugin writes to os.Stdout and
	// os.Stderr once it serves over gRPC to SyncStdout and SyncStderr; its
	// log lines and anything written before go to stderr.
	syncOut := &pluginapi.LineWriter{Logger: logger.With("stream", "stdout"), Level: slog.LevelInfo}
	syncErr := &pluginapi.LineWriter{Logger: logger.With("stream", "stderr"), Level: slog.LevelInfo}
	var secure *plugin.SecureConfig
	if len(p.cfg.Checksum) > 0 {
		secure = &plugin.SecureConfig{Checksum: p.cfg.Checksum, Hash: sha256.New()}
	}
	tail := &stderrTail{}
	client := plugin.NewClient(&plugin.ClientConfig{
		Stderr:           tail,
		HandshakeConfig:  grpcwire.Handshake,
		Plugins:          plugin.PluginSet{grpcwire.PluginName: &grpcwire.GRPCPlugin{}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     p.cfg.HandshakeTimeout,
		SecureConfig:     secure,
		Logger:           newHCLogger(stderr),
		GRPCDialOptions:  grpcwire.DialOptions(),
		SyncStdout:       syncOut,
		SyncStderr:       syncErr,
	})
	proc := &process{client: client, stderr: stderr, syncOut: syncOut, syncErr: syncErr, tail: tail, cancel: procCancel}
	stopWatch := context.AfterFunc(ctx, procCancel)
	rpc, err := client.Client()
	if cmd.Process != nil {
		// With Setpgid the group's ID is the plugin's PID.
		proc.pgid = cmd.Process.Pid
	}
	if !stopWatch() && err == nil {
		// ctx ended as the handshake finished: the process may have
		// been killed after it answered.
		err = context.Cause(ctx)
	}
	if err != nil {
		proc.kill()
		if cerr := pluginapi.ContextErr(ctx); cerr != nil {
			return nil, p.errorf(pluginapi.ErrHandshake, "start", "%w: given up while starting: %w", pluginapi.ErrDeadlineExceeded, cerr)
		}
		if sub := pluginVersionRE.FindStringSubmatch(err.Error()); sub != nil {
			want, _ := strconv.Atoi(sub[1])
			return nil, p.errorf(pluginapi.ErrVersionMismatch, "start", "%w", &pluginapi.VersionError{Want: want, Have: abi.Major})
		}
		if err.Error() == goPluginStartTimeout {
			// The handshake ran out of time: a deadline, whatever the
			// plugin's fault, so errors.Is finds both kinds.
			return nil, tail.attach(p.errorf(pluginapi.ErrHandshake, "start", "%w: no handshake within %v: %w", pluginapi.ErrDeadlineExceeded, p.cfg.HandshakeTimeout, err))
		}
		if line, ok := strings.CutPrefix(err.Error(), goPluginBadHandshake); ok {
			// go-plugin's text goes on with advice about architectures
			// and versions; what the plugin said on stderr (a
			// ModuleNotFoundError, a missing library) is the cause.
			line, _, _ = strings.Cut(line, "\n")
			what := "the process ended without printing its handshake line on stdout"
			if line = strings.TrimSpace(line); line != "" {
				what = fmt.Sprintf("the process's first line on stdout, %q, is not a go-plugin handshake (is it a compact-host plugin built with the SDK?)", line)
			}
			return nil, tail.attach(p.errorf(pluginapi.ErrHandshake, "start", "%s", what))
		}
		return nil, tail.attach(p.errorf(pluginapi.ErrHandshake, "start", "%w", err))
	}
	raw, err := rpc.Dispense(grpcwire.PluginName)
	if err != nil {
		proc.kill()
		return nil, p.errorf(pluginapi.ErrHandshake, "start", "dispense: %w", err)
	}
	proc.wire = raw.(*grpcwire.Client)
	return proc, nil
}

// kill stops the process and every process of its group. The group goes
// first: go-plugin's Kill waits for the plugin's stderr to close, which a
// child holding it open would delay for as long as the child lives, and
// a killed group makes its graceful wait return at once.
func (pr *process) kill() {
	pr.stderr.killing.Store(true)
	killGroup(pr.pgid)
	pr.cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pr.client.Kill()
	}()
	// go-plugin's Kill returns once the plugin's stderr is closed. A child
	// that left the plugin's process group (setsid) and holds it open
	// would keep Kill waiting for as long as it lives: give up on it, so
	// that closing a plugin never hangs the host.
	timer := time.NewTimer(killTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		pr.stderr.logger.Warn("plugin process killed, but something it started still holds its stderr; left behind", "timeout", killTimeout)
	}
	pr.stderr.flush()
	pr.syncOut.Flush()
	pr.syncErr.Flush()
}

// killTimeout bounds the wait for a killed plugin's streams to close.
const killTimeout = 5 * time.Second

func minimalEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG", "SYSTEMROOT"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Call sends the request frame to export and returns the answer frame.
// A call whose deadline passes kills the process, like a crash: the
// plugin's code may still be running and cannot be stopped any other way.
// The next call starts a new process.
func (p *Plugin) Call(ctx context.Context, svc pluginapi.Services, export string, frame []byte) ([]byte, error) {
	op := pluginapi.OpName(export)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.CallTimeout)
		defer cancel()
	}
	if err := pluginapi.ContextErr(ctx); err != nil {
		return nil, p.errorf(pluginapi.ErrDeadlineExceeded, op, "%w", err)
	}
	proc, err := p.conn(ctx)
	if err != nil {
		if cerr := pluginapi.ContextErr(ctx); cerr != nil {
			return nil, p.errorf(pluginapi.ErrDeadlineExceeded, op, "%w (while starting the process: %v)", cerr, err)
		}
		return nil, err
	}
	host := &hostServer{call: ctx, svc: svc, logger: p.cfg.Logger, budget: pluginapi.LogBudgetOf(ctx)}
	out, err := proc.wire.Call(ctx, host, export, frame)
	if err == nil {
		return out, nil
	}
	// The caller's context first, whatever gRPC made of it: gRPC fails a
	// call on its own reading of the deadline (or on the plugin's
	// RST_STREAM when the plugin's side of it expired) a moment before
	// ctx's timer fires on a loaded machine.
	if cerr := pluginapi.ContextErr(ctx); cerr != nil {
		p.kill(proc)
		return nil, p.errorf(pluginapi.ErrDeadlineExceeded, op, "%w", cerr)
	}
	if status.Code(err) == codes.ResourceExhausted {
		return nil, p.errorf(pluginapi.ErrOutputTooLarge, op, "%w", err)
	}
	// The connection broke: the process is gone or going. Make sure of it
	// so the next call starts afresh.
	p.kill(proc)
	return nil, p.errorf(pluginapi.ErrCrash, op, "%w", err)
}

func (p *Plugin) kill(proc *process) {
	p.mu.Lock()
	defer p.mu.Unlock()
	proc.kill()
	if p.proc == proc {
		p.proc = nil
	}
}

// Close stops the process and the processes it started.
func (p *Plugin) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.proc != nil {
		p.proc.kill()
		p.proc = nil
	}
}

// hostServer answers the plugin's host calls of one call.
type hostServer struct {
	// call is the plugin call's context: a host call the plugin makes
	// without a deadline of its own still ends with the call.
	call   context.Context
	svc    pluginapi.Services
	logger *slog.Logger
	budget *pluginapi.LogBudget
}

func (h *hostServer) Call(ctx context.Context, op uint32, frame []byte) []byte {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(h.call, func() { cancel(context.Cause(h.call)) })
	defer stop()
	if d, ok := h.call.Deadline(); ok {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, d)
		defer cancelDeadline()
	}
	return pluginapi.ServeHostCall(ctx, h.svc, op, frame)
}

func (h *hostServer) Log(level int, msg string) {
	if h.budget != nil && !h.budget.Allow(nil, len(msg)) {
		return
	}
	h.logger.Log(context.Background(), pluginapi.LogLevel(level), msg)
}
