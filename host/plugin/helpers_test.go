package plugin

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/internal/wasmrt"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/internal/testwasm"
)

// withRuntimes is o with both runtimes wired in, as the compact-host
// command wires them: for the benchmarks and fuzzers that open plugins
// from Options of their own rather than testOptions.
func withRuntimes(o Options) Options {
	o.Wasm, o.Process = wasm.Runtime, process.Runtime
	return o
}

// engine makes a wasm engine of opts, for the benchmarks that load
// modules with openWasm as a Registry does.
func (o Options) engine() (*wasmrt.Engine, error) {
	o.Wasm = wasm.Runtime
	e, err := o.wasmEngine()
	if err != nil {
		return nil, err
	}
	return e.(wasm.Engine).Engine, nil
}

func openWasm(ctx context.Context, e *wasmrt.Engine, bin []byte, path string, source Source, opts Options) (*Plugin, error) {
	return loadWasm(ctx, wasm.Engine{Engine: e}, bin, path, source, opts)
}

// Test plugins are built once per test binary into buildDir.
var (
	buildDir  string
	buildMu   sync.Mutex
	buildErrs = map[string]error{}
)

func TestMain(m *testing.M) {
	var err error
	if buildDir, err = os.MkdirTemp("", "plugin-test"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// build builds testdata/<pkg> once: as a wasm reactor when wasm is set,
// else as a native executable. ldflags may set main.name.
func build(t testing.TB, pkg string, wasm bool, ldflags string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	out := filepath.Join(buildDir, fmt.Sprintf("%s-%v-%x", pkg, wasm, ldflags))
	if wasm {
		out += ".wasm"
	}
	if err, ok := buildErrs[out]; ok {
		require.NoError(t, err)
		return out
	}
	args := []string{"build", "-o", out, "-ldflags", ldflags}
	if wasm {
		args = append(args, "-buildmode=c-shared")
	}
	cmd := exec.Command("go", append(args, "./testdata/"+pkg)...)
	cmd.Env = os.Environ()
	if wasm {
		cmd.Env = append(cmd.Env, "GOOS=wasip1", "GOARCH=wasm")
	}
	var err error
	if b, e := cmd.CombinedOutput(); e != nil {
		err = fmt.Errorf("build %s: %v\n%s", pkg, e, b)
	}
	buildErrs[out] = err
	require.NoError(t, err)
	return out
}

func testplugWasm(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(build(t, "testplug", true, "-X main.hostile=yes"))
	require.NoError(t, err)
	return b
}

func hostileWasm(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "wasmrt", "testdata", name+".wasm"))
	require.NoError(t, err)
	return b
}

// copyFile writes b to path the way an installer should: to a temporary
// name first, then renamed into place, so a watcher never sees half a file.
func copyFile(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	require.NoError(t, os.WriteFile(tmp, b, 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

// eventually retries f until it succeeds or a generous bound passes. The
// bound is a hang guard, not a speed requirement.
func eventually(t testing.TB, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			require.NoError(t, err, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func testOptions(t testing.TB, logs *logBuffer) Options {
	cache, err := testwasm.ShareCompiled(filepath.Join(buildDir, "cache"))
	require.NoError(t, err)
	opts := Options{PluginsDir: t.TempDir(), CacheDir: cache, WatchDebounce: 50 * time.Millisecond,
		Wasm: wasm.Runtime, Process: process.Runtime, Builtins: wasm.Builtins}
	if logs != nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return opts
}

func newRegistry(t testing.TB, opts Options) *Registry {
	t.Helper()
	r, err := NewRegistry(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}
