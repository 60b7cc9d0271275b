package pluginapi

import (
	"context"
	"log/slog"
	"time"

	"github.com/compact-host/compact-host/abi"
)

// The runtimes are wired into package plugin through its Options, so that
// the package itself links neither wazero nor go-plugin: these are the
// shapes they meet in, defined here so that neither side imports the
// other.

// Conn is one loaded plugin as its runtime carries it: frames in, frames
// out. A wasm module (wasmrt) and a process (procrt) are Conns; package
// plugin adds the call's deadline, limits and log budget around it.
type Conn interface {
	Info() abi.Info
	Call(ctx context.Context, svc Services, export string, frame []byte) ([]byte, error)
	// Close releases the plugin once its calls have returned.
	Close()
}

// WasmConfig is what a wasm runtime is made with: plugin.Options with
// its defaults applied.
type WasmConfig struct {
	// CacheDir keeps compiled modules across runs; empty keeps them in
	// memory.
	CacheDir string
	// MemoryLimitBytes bounds an instance's memory; zero is the runtime's
	// default.
	MemoryLimitBytes uint64
	// MaxOutputBytes bounds one answer; zero is the runtime's default.
	MaxOutputBytes int
	// MaxInstances bounds a plugin's instances; zero is the runtime's
	// default.
	MaxInstances int
	// Logger receives the plugins' log lines. Never nil.
	Logger *slog.Logger
}

// WasmEngine loads wasm plugins; the plugins of one engine share its
// compiled modules. A Registry has one.
type WasmEngine interface {
	Load(ctx context.Context, path string, bin []byte) (Conn, error)
	Close(ctx context.Context) error
}

// WasmRuntime makes a WasmEngine.
type WasmRuntime func(WasmConfig) (WasmEngine, error)

// ProcessConfig says how to start a process plugin: its manifest,
// resolved, and the limits of plugin.Options.
type ProcessConfig struct {
	// Command is the executable; Args its arguments.
	Command string
	Args    []string
	// Dir is the working directory; empty means the host's.
	Dir string
	// Checksum, when set, is the SHA-256 the executable must have; the
	// process is not started otherwise.
	Checksum []byte
	// HandshakeTimeout bounds the handshake, and then the Info call
	// unless ctx ends sooner; zero is the runtime's default.
	HandshakeTimeout time.Duration
	// CallTimeout bounds a call whose context has no deadline; zero is
	// the runtime's default. No call into a process is unbounded: a
	// plugin that never answers must not hang the host.
	CallTimeout time.Duration
	// Logger receives the plugin's log and stderr. Never nil.
	Logger *slog.Logger
}

// ProcessRuntime starts a process plugin and asks for its Info.
type ProcessRuntime func(ctx context.Context, cfg ProcessConfig) (Conn, error)

// Builtins are plugins shipped as wasm modules inside the binary.
type Builtins interface {
	// Names lists them, sorted.
	Names() []string
	// Wasm returns the module of one; the bytes must not be modified.
	Wasm(name string) ([]byte, bool)
}
