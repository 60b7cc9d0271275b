// Package procrt runs process plugins with hashicorp/go-plugin over gRPC:
// one process per plugin, started with a bounded handshake, optionally
// pinned to a SHA-256 checksum, restarted on the call after a crash.
package procrt

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
	"github.com/compact-host/compact-host/sdk/grpcwire"
)

// DefaultHandshakeTimeout bounds the start of a plugin process.
const DefaultHandshakeTimeout = 10 * time.Second

// Config says how to start a process plugin.
type Config struct {
	// Command is the executable; Args its arguments.
	Command string
	Args    []string
	// Dir is the working directory; empty means the host's.
	Dir string
	// Checksum, when set, is the SHA-256 the executable must have; the
	// process is not started otherwise.
	Checksum []byte
	// HandshakeTimeout bounds the start; zero means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Logger receives the plugin's log and stderr.
	Logger *slog.Logger
}

// Plugin is a running process plugin. It is safe for concurrent use.
type Plugin struct {
	cfg  Config
	info abi.Info

	mu     sync.Mutex
	client *plugin.Client
	wire   *grpcwire.Client
	closed bool
}

// Start starts the process, completes the handshake and asks for Info.
func Start(ctx context.Context, cfg Config) (*Plugin, error) {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Plugin{cfg: cfg}
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
// none: at the first call, or after a crash.
func (p *Plugin) conn() (*plugin.Client, *grpcwire.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, p.errorf(pluginapi.ErrClosed, "call", "closed")
	}
	if p.client != nil && !p.client.Exited() {
		return p.client, p.wire, nil
	}
	if p.client != nil {
		p.cfg.Logger.Warn("plugin process exited; restarting", "path", p.cfg.Command)
		p.client.Kill()
	}
	client, wire, err := p.start()
	if err != nil {
		return nil, nil, err
	}
	p.client, p.wire = client, wire
	return client, wire, nil
}

var pluginVersionRE = regexp.MustCompile(`Plugin version: (\d+)`)

func (p *Plugin) start() (*plugin.Client, *grpcwire.Client, error) {
	cmd := exec.Command(p.cfg.Command, p.cfg.Args...)
	cmd.Dir = p.cfg.Dir
	// The host's environment holds provider API keys; a plugin gets only
	// what it needs to run.
	cmd.Env = minimalEnv()
	var secure *plugin.SecureConfig
	if len(p.cfg.Checksum) > 0 {
		secure = &plugin.SecureConfig{Checksum: p.cfg.Checksum, Hash: sha256.New()}
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  grpcwire.Handshake,
		Plugins:          plugin.PluginSet{grpcwire.PluginName: &grpcwire.GRPCPlugin{}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     p.cfg.HandshakeTimeout,
		SecureConfig:     secure,
		Logger:           newHCLogger(p.cfg.Logger.With("path", p.cfg.Command)),
		GRPCDialOptions:  grpcwire.DialOptions(),
	})
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		if sub := pluginVersionRE.FindStringSubmatch(err.Error()); sub != nil {
			want, _ := strconv.Atoi(sub[1])
			return nil, nil, p.errorf(pluginapi.ErrVersionMismatch, "start", "%w", &pluginapi.VersionError{Want: want, Have: abi.Major})
		}
		return nil, nil, p.errorf(pluginapi.ErrHandshake, "start", "%w", err)
	}
	raw, err := rpc.Dispense(grpcwire.PluginName)
	if err != nil {
		client.Kill()
		return nil, nil, p.errorf(pluginapi.ErrHandshake, "start", "dispense: %w", err)
	}
	return client, raw.(*grpcwire.Client), nil
}

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
	client, wire, err := p.conn()
	if err != nil {
		return nil, err
	}
	out, err := wire.Call(ctx, hostServer{svc: svc, logger: p.cfg.Logger}, export, frame)
	if err == nil {
		return out, nil
	}
	switch {
	case ctx.Err() != nil:
		p.kill(client)
		return nil, p.errorf(pluginapi.ErrDeadlineExceeded, op, "%w", ctx.Err())
	case status.Code(err) == codes.ResourceExhausted:
		return nil, p.errorf(pluginapi.ErrOutputTooLarge, op, "%w", err)
	}
	// The connection broke: the process is gone or going. Make sure of it
	// so the next call starts afresh.
	p.kill(client)
	return nil, p.errorf(pluginapi.ErrCrash, op, "%w", err)
}

func (p *Plugin) kill(client *plugin.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	client.Kill()
	if p.client == client {
		p.client, p.wire = nil, nil
	}
}

// Close stops the process.
func (p *Plugin) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.client != nil {
		p.client.Kill()
		p.client, p.wire = nil, nil
	}
}

// hostServer answers the plugin's host calls of one call.
type hostServer struct {
	svc    pluginapi.Services
	logger *slog.Logger
}

func (h hostServer) Call(ctx context.Context, op uint32, frame []byte) []byte {
	return pluginapi.ServeHostCall(ctx, h.svc, op, frame)
}

func (h hostServer) Log(level int, msg string) {
	h.logger.Log(context.Background(), pluginapi.LogLevel(level), msg)
}
