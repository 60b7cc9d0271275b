package wasmrt

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// The hostile plugins are hand-written WAT; rebuild them with
//
//	cd testdata && for f in *.wat; do wat2wasm $f -o ${f%.wat}.wasm; done
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
	if testplugErr != nil {
		t.Fatal(testplugErr)
	}
	return testplugBin
}

func hostileBin(t testing.TB, name string) []byte {
	t.Helper()
	b, err := hostile.ReadFile("testdata/" + name + ".wasm")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func load(t testing.TB, e *Engine, bin []byte) *Module {
	t.Helper()
	m, err := e.Load(context.Background(), "test.wasm", bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func truncate(t testing.TB, ctx context.Context, m *Module, svc pluginapi.Services, category string, content []byte, maxTokens int) (*abi.TruncateResponse, error) {
	t.Helper()
	frame, err := abi.Encode(&abi.TruncateRequest{Category: category, Content: content, MaxTokens: maxTokens})
	if err != nil {
		t.Fatal(err)
	}
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
	if info.Name != "testplug" || info.ABIMajor != abi.Major || !info.Has(abi.KindStrategy) || !info.Has(abi.KindTruncator) {
		t.Fatalf("info = %+v", info)
	}
	content := []byte(strings.Repeat("héllo wörld\n", 1000))
	resp, err := truncate(t, context.Background(), m, nil, "generic", content, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Truncated || len(resp.Content) > 400 || !strings.Contains(string(resp.Content), "omitted") {
		t.Fatalf("truncate gave truncated=%v %d bytes: %q", resp.Truncated, len(resp.Content), resp.Content)
	}
	resp, err = truncate(t, context.Background(), m, fakeModel{}, "callhost", []byte("the input"), 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Content); got != "model saw the input" {
		t.Fatalf("callhost = %q", got)
	}
	_, err = truncate(t, context.Background(), m, nil, "callhost", []byte("x"), 100)
	var abiErr *abi.Error
	if !errors.As(err, &abiErr) || abiErr.Code != abi.CodeNoModel {
		t.Fatalf("callhost with no model: err = %v, want code %s", err, abi.CodeNoModel)
	}
}

func TestPanicInPluginIsAnErrorFrame(t *testing.T) {
	m := load(t, newEngine(t, Config{}), testplug(t))
	_, err := truncate(t, context.Background(), m, nil, "panic", []byte("x"), 10)
	var abiErr *abi.Error
	if !errors.As(err, &abiErr) || abiErr.Code != abi.CodeInternal || !strings.Contains(abiErr.Message, "asked to panic") {
		t.Fatalf("err = %v, want an internal error frame quoting the panic", err)
	}
}

func TestDeadlineKillsTheInstanceOnly(t *testing.T) {
	m := load(t, newEngine(t, Config{}), testplug(t))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := truncate(t, ctx, m, nil, "spin", []byte("x"), 10)
	if !errors.Is(err, pluginapi.ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrDeadlineExceeded", err)
	}
	if _, err := truncate(t, context.Background(), m, nil, "generic", []byte("fine"), 10); err != nil {
		t.Fatalf("call after a killed instance: %v", err)
	}
}

func TestGoPluginMemoryLimit(t *testing.T) {
	m := load(t, newEngine(t, Config{MemoryLimitPages: 1024}), testplug(t))
	_, err := truncate(t, context.Background(), m, nil, "hog", []byte("x"), 10)
	if !errors.Is(err, pluginapi.ErrMemoryLimit) {
		t.Fatalf("err = %v, want ErrMemoryLimit", err)
	}
	if _, err := truncate(t, context.Background(), m, nil, "generic", []byte("fine"), 10); err != nil {
		t.Fatalf("call after the memory limit: %v", err)
	}
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
	} {
		t.Run(tc.name+"/"+tc.export, func(t *testing.T) {
			e := newEngine(t, Config{MemoryLimitPages: 64})
			m, err := e.Load(context.Background(), tc.name+".wasm", hostileBin(t, tc.name))
			if tc.loadErr != nil {
				if !errors.Is(err, tc.loadErr) || !strings.Contains(err.Error(), tc.text) {
					t.Fatalf("load err = %v, want %v mentioning %q", err, tc.loadErr, tc.text)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
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
			if !errors.Is(err, tc.callErr) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("call err = %v, want %v mentioning %q", err, tc.callErr, tc.text)
			}
			// The module keeps serving: a fresh instance replaces a bad one.
			_, err = m.Call(context.Background(), nil, abi.ExportInfo, nil)
			if err != nil {
				t.Fatalf("info after the failure: %v", err)
			}
		})
	}
}

func TestMalformedOutputIsReturnedForDecoding(t *testing.T) {
	m := load(t, newEngine(t, Config{}), hostileBin(t, "malformed"))
	out, err := m.Call(context.Background(), nil, abi.ExportSummarize, []byte("req"))
	if err != nil {
		t.Fatal(err)
	}
	if err := abi.Decode(out, &abi.SummarizeResponse{}); !errors.Is(err, abi.ErrMalformed) {
		t.Fatalf("decode err = %v, want abi.ErrMalformed", err)
	}
}

func TestConcurrentLoadsShareOneModule(t *testing.T) {
	e := newEngine(t, Config{})
	bin := testplug(t)
	mods := make([]*Module, 4)
	var wg sync.WaitGroup
	for i := range mods {
		wg.Go(func() {
			m, err := e.Load(context.Background(), "p.wasm", bin)
			if err != nil {
				t.Error(err)
				return
			}
			mods[i] = m
		})
	}
	wg.Wait()
	for _, m := range mods[1:] {
		if m == nil || m.module != mods[0].module {
			t.Fatal("concurrent loads of the same bytes compiled more than once")
		}
	}
	for _, m := range mods {
		m.Close()
	}
	// Closing every handle closes the module; a new load starts afresh.
	m := load(t, e, bin)
	if m.module == mods[0].module {
		t.Fatal("a closed module was handed out again")
	}
}

func TestConcurrentCalls(t *testing.T) {
	m := load(t, newEngine(t, Config{MaxInstances: 3}), testplug(t))
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			content := []byte(strings.Repeat(fmt.Sprint(i), 10))
			resp, err := truncate(t, context.Background(), m, nil, "generic", content, 100)
			if err != nil {
				t.Error(err)
				return
			}
			if string(resp.Content) != string(content) {
				t.Errorf("call %d got %q", i, resp.Content)
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
	if err != nil || len(entries) == 0 {
		t.Fatalf("cache dir has %d entries (err %v), want the compiled module", len(entries), err)
	}
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
		if err != nil || string(resp.Content) != string(content) {
			t.Fatalf("call of %d bytes: %v", size, err)
		}
	}
	call(10)
	first := idle()
	ptr := first.reqPtr
	if ptr == 0 || first.reqCap < minRequestBytes {
		t.Fatalf("no request buffer kept: %#x (%d bytes)", ptr, first.reqCap)
	}
	for _, size := range []int{100, 3000, 1} {
		call(size)
		if inst := idle(); inst != first || inst.reqPtr != ptr {
			t.Fatalf("call of %d bytes moved the request buffer from %#x to %#x", size, ptr, inst.reqPtr)
		}
	}
	call(keepRequestBytes + 1)
	if inst := idle(); inst.reqPtr != 0 {
		t.Fatalf("a %d byte request buffer was kept", inst.reqCap)
	}
	call(5)
	if inst := idle(); inst.reqPtr == 0 || inst.reqCap != minRequestBytes {
		t.Fatalf("after a large call: buffer %#x of %d bytes, want a new one of %d", inst.reqPtr, inst.reqCap, minRequestBytes)
	}
}
