package wasmrt

import (
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
	"github.com/compact-host/compact-host/internal/testwasm"
)

// The hostile plugins are hand-written WAT; rebuild them with `make
// hostile` (wat2wasm, from Debian's wabt).
//
//go:embed testdata/*.wasm
var hostile embed.FS

var (
	testplugOnce sync.Once
	testplugBin  []byte
	testplugErr  error
)

// testplug builds host/plugin/testdata/testplug, a Go plugin written with
// the SDK, as a wasm reactor.
func testplug(t testing.TB) []byte {
	t.Helper()
	testplugOnce.Do(func() {
		dir, err := os.MkdirTemp("", "testplug")
		if err != nil {
			testplugErr = err
			return
		}
		out := filepath.Join(dir, "testplug.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags", "-X main.hostile=yes", "-o", out, "../../plugin/testdata/testplug")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if b, err := cmd.CombinedOutput(); err != nil {
			testplugErr = fmt.Errorf("build testplug: %v\n%s", err, b)
			return
		}
		testplugBin, testplugErr = os.ReadFile(out)
	})
	require.NoError(t, testplugErr)
	return testplugBin
}

func hostileBin(t testing.TB, name string) []byte {
	t.Helper()
	b, err := hostile.ReadFile("testdata/" + name + ".wasm")
	require.NoError(t, err)
	return b
}

// newEngine returns an Engine over the machine's shared compilation cache
// for tests (internal/testwasm) unless cfg names a cache of its own, so
// testplug and the built-ins compile once per machine.
func newEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	if cfg.CacheDir == "" {
		dir, err := testwasm.Dir()
		require.NoError(t, err)
		cfg.CacheDir = dir
	}
	return engineOf(t, cfg)
}

// uncachedEngine returns an Engine whose loads compile, for the tests of
// what happens while a module compiles.
func uncachedEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	return engineOf(t, cfg)
}

func engineOf(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := NewEngine(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func load(t testing.TB, e *Engine, bin []byte) *Module {
	t.Helper()
	m, err := e.Load(context.Background(), "test.wasm", bin)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return m
}

func truncate(t testing.TB, ctx context.Context, m *Module, svc pluginapi.Services, category string, content []byte, maxTokens int) (*abi.TruncateResponse, error) {
	t.Helper()
	frame, err := abi.Encode(&abi.TruncateRequest{Category: category, Content: content, MaxTokens: maxTokens})
	require.NoError(t, err)
	out, err := m.Call(ctx, svc, abi.ExportTruncate, frame)
	if err != nil {
		return nil, err
	}
	var resp abi.TruncateResponse
	return &resp, abi.Decode(out, &resp)
}

type fakeModel struct{ pluginapi.Offline }

func (fakeModel) Complete(_ context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	return &abi.CompleteResponse{Text: "model saw " + req.Messages[0].Content[0].Text}, nil
}

func TestGoPluginRoundTrip(t *testing.T) {
	m := load(t, newEngine(t, Config{}), testplug(t))
	info := m.Info()
	assert.Equal(t, "testplug", info.Name)
	assert.Equal(t, abi.Major, info.ABIMajor)
	assert.True(t, info.Has(abi.KindStrategy) && info.Has(abi.KindTruncator), "kinds %v", info.Kinds)
	content := []byte(strings.Repeat("héllo wörld\n", 1000))
	resp, err := truncate(t, context.Background(), m, nil, "generic", content, 100)
	require.NoError(t, err)
	assert.True(t, resp.Truncated)
	assert.LessOrEqual(t, len(resp.Content), 400)
	assert.Contains(t, string(resp.Content), "omitted")
	resp, err = truncate(t, context.Background(), m, fakeModel{}, "callhost", []byte("the input"), 100)
	require.NoError(t, err)
	assert.Equal(t, "model saw the input", string(resp.Content))
	_, err = truncate(t, context.Background(), m, nil, "callhost", []byte("x"), 100)
	var abiErr *abi.Error
	require.ErrorAs(t, err, &abiErr, "callhost with no model")
	assert.Equal(t, abi.CodeNoModel, abiErr.Code)
}

func TestPanicInPluginIsAnErrorFrame(t *testing.T) {
	m := load(t, newEngine(t, Config{}), testplug(t))
	_, err := truncate(t, context.Background(), m, nil, "panic", []byte("x"), 10)
	var abiErr *abi.Error
	require.ErrorAs(t, err, &abiErr, "want an internal error frame quoting the panic")
	assert.Equal(t, abi.CodeInternal, abiErr.Code)
	assert.Contains(t, abiErr.Message, "asked to panic")
}

func TestDeadlineKillsTheInstanceOnly(t *testing.T) {
	m := load(t, newEngine(t, Config{}), testplug(t))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := truncate(t, ctx, m, nil, "spin", []byte("x"), 10)
	assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = truncate(t, context.Background(), m, nil, "generic", []byte("fine"), 10)
	assert.NoError(t, err, "call after a killed instance")
}

func TestGoPluginMemoryLimit(t *testing.T) {
	m := load(t, newEngine(t, Config{MemoryLimitPages: 1024}), testplug(t))
	_, err := truncate(t, context.Background(), m, nil, "hog", []byte("x"), 10)
	assert.ErrorIs(t, err, pluginapi.ErrMemoryLimit)
	_, err = truncate(t, context.Background(), m, nil, "generic", []byte("fine"), 10)
	assert.NoError(t, err, "call after the memory limit")
}

func TestHostilePlugins(t *testing.T) {
	for _, tc := range []struct {
		name    string
		export  string
		loadErr error
		callErr error
		text    string
	}{
		{name: "trap", export: abi.ExportTruncate, callErr: pluginapi.ErrTrap, text: "unreachable"},
		{name: "loop", export: abi.ExportTruncate, callErr: pluginapi.ErrDeadlineExceeded},
		{name: "grow", export: abi.ExportTruncate, callErr: pluginapi.ErrMemoryLimit},
		{name: "huge", export: abi.ExportTruncate, callErr: pluginapi.ErrOutputTooLarge},
		{name: "oob", export: abi.ExportSummarize, callErr: pluginapi.ErrMalformedOutput, text: "outside"},
		{name: "oob", export: abi.ExportTruncate, callErr: pluginapi.ErrMalformedOutput, text: "outside"},
		{name: "v2", loadErr: pluginapi.ErrVersionMismatch, text: "plugin wants ABI v2, host speaks v1"},
		{name: "liar", loadErr: pluginapi.ErrVersionMismatch, text: "plugin wants ABI v2, host speaks v1"},
		{name: "bigtable", loadErr: pluginapi.ErrInvalidPlugin, text: "over the limit"},
		{name: "nomem", loadErr: pluginapi.ErrInvalidPlugin, text: `does not export its memory as "memory"`},
		{name: "hiddenmem", loadErr: pluginapi.ErrInvalidPlugin, text: `does not export its memory as "memory"`},
		{name: "badimport", loadErr: pluginapi.ErrInvalidPlugin, text: "imports compact_host_v1.log as [i32] -> [], but the host's is [i32 i32 i32] -> []"},
		{name: "deepnest", loadErr: pluginapi.ErrInvalidPlugin, text: "nests blocks deeper than 2000"},
		{name: "badinit", loadErr: pluginapi.ErrInvalidPlugin, text: "export _initialize has signature [i32] -> [], want [] -> []"},
		{name: "importmem", loadErr: pluginapi.ErrInvalidPlugin, text: "imports the memory compact_host_v1.memory; the host provides functions only"},
	} {
		t.Run(tc.name+"/"+tc.export, func(t *testing.T) {
			e := newEngine(t, Config{MemoryLimitPages: 64})
			m, err := e.Load(context.Background(), tc.name+".wasm", hostileBin(t, tc.name))
			if tc.loadErr != nil {
				require.ErrorIs(t, err, tc.loadErr)
				assert.ErrorContains(t, err, tc.text)
				assert.ErrorContains(t, err, tc.name+".wasm", "the error names the file")
				return
			}
			require.NoError(t, err)
			defer m.Close()
			// Only loop needs its deadline; for the others it only keeps a
			// regression from hanging the test.
			timeout := 30 * time.Second
			if tc.callErr == pluginapi.ErrDeadlineExceeded {
				timeout = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			frame, _ := abi.Encode(&abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: 1})
			_, err = m.Call(ctx, nil, tc.export, frame)
			require.ErrorIs(t, err, tc.callErr)
			assert.ErrorContains(t, err, tc.text)
			// The module keeps serving: a fresh instance replaces a bad one.
			_, err = m.Call(context.Background(), nil, abi.ExportInfo, nil)
			assert.NoError(t, err, "info after the failure")
		})
	}
}

func TestMalformedOutputIsReturnedForDecoding(t *testing.T) {
	m := load(t, newEngine(t, Config{}), hostileBin(t, "malformed"))
	out, err := m.Call(context.Background(), nil, abi.ExportSummarize, []byte("req"))
	require.NoError(t, err)
	assert.ErrorIs(t, abi.Decode(out, &abi.SummarizeResponse{}), abi.ErrMalformed)
}

func TestConcurrentLoadsShareOneModule(t *testing.T) {
	e := newEngine(t, Config{})
	bin := testplug(t)
	mods := make([]*Module, 4)
	var wg sync.WaitGroup
	for i := range mods {
		wg.Go(func() {
			m, err := e.Load(context.Background(), "p.wasm", bin)
			if assert.NoError(t, err) {
				mods[i] = m
			}
		})
	}
	wg.Wait()
	for _, m := range mods {
		require.NotNil(t, m)
		require.Same(t, mods[0].module, m.module, "concurrent loads of the same bytes compiled more than once")
	}
	for _, m := range mods {
		m.Close()
	}
	// Closing every handle closes the module; a new load starts afresh.
	m := load(t, e, bin)
	assert.NotSame(t, mods[0].module, m.module, "a closed module was handed out again")
}

func TestConcurrentCalls(t *testing.T) {
	m := load(t, newEngine(t, Config{MaxInstances: 3}), testplug(t))
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			content := []byte(strings.Repeat(fmt.Sprint(i), 10))
			resp, err := truncate(t, context.Background(), m, nil, "generic", content, 100)
			if assert.NoError(t, err) {
				assert.Equal(t, string(content), string(resp.Content), "call %d", i)
			}
		})
	}
	wg.Wait()
}

func TestCompilationCacheOnDisk(t *testing.T) {
	dir := t.TempDir()
	m := load(t, newEngine(t, Config{CacheDir: dir}), hostileBin(t, "trap"))
	m.Close()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.NotEmpty(t, entries, "the cache dir holds the compiled module")
}

// A warm call reuses the request buffer of the instance's last call, so it
// enters the module once; a request over keepRequestBytes gets a buffer of
// its own that goes back to the plugin after the call. The SDK plugin
// refuses a request in a buffer it did not allocate or already freed, so
// the answers also check that host and plugin agree on who owns what.
func TestRequestBufferIsKeptAcrossCalls(t *testing.T) {
	m := load(t, newEngine(t, Config{MaxInstances: 1}), testplug(t))
	ctx := context.Background()
	idle := func() *instance {
		inst := <-m.idle
		m.idle <- inst
		return inst
	}
	call := func(size int) {
		t.Helper()
		content := []byte(strings.Repeat("x", size))
		resp, err := truncate(t, ctx, m, nil, "noop", content, size)
		require.NoError(t, err, "call of %d bytes", size)
		require.Equal(t, string(content), string(resp.Content), "call of %d bytes", size)
	}
	call(10)
	first := idle()
	ptr := first.reqPtr
	require.NotZero(t, ptr, "no request buffer kept")
	require.GreaterOrEqual(t, first.reqCap, minRequestBytes)
	for _, size := range []int{100, 3000, 1} {
		call(size)
		inst := idle()
		assert.Same(t, first, inst, "call of %d bytes changed the instance", size)
		assert.Equal(t, ptr, inst.reqPtr, "call of %d bytes moved the request buffer", size)
	}
	call(keepRequestBytes + 1)
	assert.Zero(t, idle().reqPtr, "a request buffer over %d bytes was kept", keepRequestBytes)
	call(5)
	inst := idle()
	assert.NotZero(t, inst.reqPtr, "no buffer after a large call")
	assert.Equal(t, minRequestBytes, inst.reqCap)
}
