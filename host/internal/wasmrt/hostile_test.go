package wasmrt

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/builtin"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// countsModules returns the modules carried by testdata/counts.wasm: its
// passive data segments, each the case's name, a NUL byte and the module.
func countsModules(t testing.TB) map[string][]byte {
	t.Helper()
	r := &wasmReader{b: hostileBin(t, "counts"), i: 8}
	out := map[string][]byte{}
	for r.i < len(r.b) && r.err == nil {
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if id != secData {
			continue
		}
		s := &wasmReader{b: body}
		for n := s.u32(); n > 0 && s.err == nil; n-- {
			require.Equal(t, uint32(1), s.u32(), "counts.wasm holds passive segments only")
			seg := s.bytes(int(s.u32()))
			name, module, ok := bytes.Cut(seg, []byte{0})
			require.True(t, ok, "a segment of counts.wasm without its name")
			out[strings.TrimPrefix(string(name), "hostile/")] = module
		}
		require.NoError(t, s.err)
	}
	require.NoError(t, r.err)
	require.NotEmpty(t, out)
	return out
}

// hostileModule is a testdata module, or "counts/<case>" one of those
// counts.wasm carries.
func hostileModule(t testing.TB, name string) []byte {
	t.Helper()
	if c, ok := strings.CutPrefix(name, "counts/"); ok {
		b, ok := countsModules(t)[c]
		require.True(t, ok, "counts.wasm has no case %q", c)
		return b
	}
	return hostileBin(t, name)
}

// The pre-check refuses each declaration over a limit, naming it, before
// wazero allocates for it; these are the modules that made the host
// allocate gigabytes.
func TestPrecheckRefusesDeclarationsOverTheLimits(t *testing.T) {
	for name, want := range map[string]string{
		"locals":         "function 4 declares 268435455 locals or more, over the limit of 50000",
		"counts/funcs":   "functions: 4294967295 at offset 29, over the limit of 1000000",
		"counts/globals": "globals: 268435455 at offset 41, over the limit of 1000000",
		"counts/types":   "parameters: 4294967295 at offset 28, over the limit of 1000",
		"counts/data":    "bytes of a data segment: 4294967295 at offset 153, over the limit of 67108864",
		"counts/elem":    "elements of a segment: 4294967295 at offset 135, over the limit of 1048576",
		"counts/names":   "names: 4294967295 at offset 158, over the limit of 1000000",
		"counts/table40": "tables start with 134217728 elements together, over the limit of 1048576",
		"bigtable":       "tables start with 134217728 elements together, over the limit of 1048576",
		"deepnest":       "function 4 nests blocks deeper than 2000 at offset",
	} {
		_, err := precheck(hostileModule(t, name))
		assert.ErrorIs(t, err, errOverLimit, name)
		assert.ErrorContains(t, err, want, name)
	}
	// Nesting within the depth limit in each function, but too much in
	// all: the sum of depths is what wazero's compile time follows.
	_, err := precheck(nestedModule(8, maxNesting-1))
	assert.NoError(t, err, "8 functions nesting 1,999 blocks")
	_, err = precheck(nestedModule(9, maxNesting-1))
	assert.ErrorIs(t, err, errOverLimit)
	assert.ErrorContains(t, err, "the depths of the module's blocks sum to more than 16777216, the limit (in function 12")

	// A count the bytes after it cannot hold is refused as malformed
	// whatever its limit: here 500,000 globals in five bytes.
	bin := append([]byte("\x00asm\x01\x00\x00\x00\x06\x08"), appendU32(nil, 500_000)...)
	bin = append(bin, 0x7f, 0x00, 0x41, 0x00, 0x0b)
	_, err = precheck(bin)
	assert.ErrorIs(t, err, errMalformed)
	assert.ErrorContains(t, err, "globals: 500000 declared, but only 5 bytes follow")
}

// The project's own plugins pass with room to spare: the limits are for
// hostile modules, not for large ones.
func TestPrecheckPassesRealPlugins(t *testing.T) {
	real := map[string][]byte{"testplug": testplug(t)}
	for _, name := range builtin.Names() {
		b, ok := builtin.Wasm(name)
		require.True(t, ok, name)
		real[name] = b
	}
	c, err := os.ReadFile("../../../examples/c-truncator/logdedup.wasm")
	require.NoError(t, err)
	real["logdedup"] = c
	for name, bin := range real {
		shape, err := precheck(bin)
		require.NoError(t, err, name)
		assert.LessOrEqual(t, shape.depth, maxNesting/2, name)
		assert.LessOrEqual(t, shape.depthSum, int64(maxNestingWork/2), name)
		assert.LessOrEqual(t, shape.locals, int64(maxModuleLocals/100), name)
	}
}

// A table without a maximum (every Go plugin's) gets one within the
// budget; one whose maximum fits keeps its bytes as they are.
func TestBoundTables(t *testing.T) {
	bin := testplug(t)
	shape, err := precheck(bin)
	require.NoError(t, err)
	require.Len(t, shape.tables, 1)
	require.Equal(t, int64(-1), shape.tables[0].max, "Go's linker declares no maximum")
	bounded := boundTables(bin, shape)
	after, err := precheck(bounded)
	require.NoError(t, err)
	assert.Equal(t, []tableLimits{{min: shape.tables[0].min, max: maxTableElements}}, after.tables)
	_, err = instrument(bounded)
	assert.NoError(t, err, "the bounded module is still instrumentable")

	c, err := os.ReadFile("../../../examples/c-truncator/logdedup.wasm")
	require.NoError(t, err)
	shape, err = precheck(c)
	require.NoError(t, err)
	assert.Equal(t, c, boundTables(c, shape), "a table with a maximum within the budget is left alone")
}

// TestSleepEndsAtTheDeadline: a plugin sleeping an hour through WASI, in a
// call or in its _initialize, is stopped at the deadline, and the module
// serves the next call.
func TestSleepEndsAtTheDeadline(t *testing.T) {
	// A hang guard, not a speed requirement: the sleep is an hour.
	const guard = time.Minute
	m := load(t, newEngine(t, Config{}), hostileBin(t, "sleep"))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := truncate(t, ctx, m, nil, "generic", []byte("x"), 1)
		errc <- err
	}()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(guard):
		t.Fatalf("the call slept %v past its deadline", guard)
	}
	_, err := m.Call(context.Background(), nil, abi.ExportInfo, nil)
	assert.NoError(t, err, "info after the stopped sleep")

	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	go func() {
		_, err := newEngine(t, Config{}).Load(ctx, "sleepinit.wasm", hostileBin(t, "sleepinit"))
		errc <- err
	}()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
	case <-time.After(guard):
		t.Fatalf("the load slept %v past its deadline", guard)
	}
}

// cancelOnLine is a log handler that cancels a context when a plugin logs
// the line "cancel".
type cancelOnLine struct {
	mu     *sync.Mutex
	cancel *context.CancelFunc
}

func (h cancelOnLine) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelOnLine) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h cancelOnLine) WithGroup(string) slog.Handler            { return h }
func (h cancelOnLine) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Message == "cancel" && *h.cancel != nil {
		(*h.cancel)()
	}
	return nil
}

// When the caller's context is done, the error is the deadline's,
// whatever else went wrong as it ended.
func TestDeadlineIsReportedAsTheDeadline(t *testing.T) {
	t.Run("a malformed answer as the call is cancelled", func(t *testing.T) {
		h := cancelOnLine{mu: &sync.Mutex{}, cancel: new(context.CancelFunc)}
		m := load(t, newEngine(t, Config{Logger: slog.New(h)}), hostileBin(t, "logcancel"))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h.mu.Lock()
		*h.cancel = cancel
		h.mu.Unlock()
		_, err := truncate(t, ctx, m, nil, "generic", []byte("x"), 1)
		assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
		assert.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, pluginapi.ErrMalformedOutput)
	})

	t.Run("waiting for another load of the same bytes", func(t *testing.T) {
		e := uncachedEngine(t, Config{})
		bin := testplug(t)
		first := make(chan error, 1)
		go func() {
			m, err := e.Load(context.Background(), "testplug.wasm", bin)
			if err == nil {
				m.Close()
			}
			first <- err
		}()
		waitForLoads(t, e, bin, 1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := e.Load(ctx, "testplug.wasm", bin)
		assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
		assert.ErrorIs(t, err, context.Canceled)
		assert.NoError(t, <-first)
	})

	t.Run("another caller's deadline is not this caller's", func(t *testing.T) {
		e := uncachedEngine(t, Config{})
		bin := testplug(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		first := make(chan error, 1)
		go func() {
			_, err := e.Load(ctx, "testplug.wasm", bin)
			first <- err
		}()
		waitForLoads(t, e, bin, 1)
		second := make(chan error, 1)
		go func() {
			m, err := e.Load(context.Background(), "testplug.wasm", bin)
			if err == nil {
				m.Close()
			}
			second <- err
		}()
		waitForLoads(t, e, bin, 2)
		cancel()
		assert.ErrorIs(t, <-first, pluginapi.ErrDeadlineExceeded)
		assert.NoError(t, <-second, "the second load failed with the first one's deadline")
	})
}

// waitForLoads waits until n loads of bin are registered with e.
func waitForLoads(t *testing.T, e *Engine, bin []byte, n int) {
	t.Helper()
	key := moduleKey(sha256.Sum256(bin))
	deadline := time.Now().Add(time.Minute) // a hang guard
	for {
		e.mu.Lock()
		s := e.modules[key]
		ready := s != nil && s.refs >= n
		e.mu.Unlock()
		if ready {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d loads never registered", n)
		time.Sleep(time.Millisecond)
	}
}

// A load whose deadline passes while wazero compiles returns then, not
// when the compilation ends: wazero's compiler looks at the context only
// between functions (and only with more than one worker). The bound is
// relative to a full load of the same module on the same machine, so
// load on the machine scales both.
func TestLoadStopsCompilingAtItsDeadline(t *testing.T) {
	bin := testplug(t)
	start := time.Now()
	load(t, uncachedEngine(t, Config{}), bin)
	full := time.Since(start)

	ctx, cancel := context.WithTimeout(context.Background(), full/20)
	defer cancel()
	start = time.Now()
	_, err := uncachedEngine(t, Config{}).Load(ctx, "testplug.wasm", bin)
	took := time.Since(start)
	require.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
	assert.NotErrorIs(t, err, pluginapi.ErrInvalidPlugin)
	assert.Less(t, took, full/2, "a load cut short at %v took %v; a full one %v", full/20, took, full)
}

// The hostile modules run in a child process under an address-space
// limit: each must end in a typed error, where several used to make the
// host allocate gigabytes and die ("fatal error: out of memory"), which
// no recover catches.
const (
	hostileCaseEnv = "WASMRT_HOSTILE_CASE"
	// childAddressSpace is the child's RLIMIT_AS. A child loading and
	// calling these modules peaks at 1.5–1.8 GiB of address space (Go
	// reserves some, wazero maps executable memory; the test prints
	// VmPeak), so 3 GiB leaves room while refusing any allocation of
	// the sizes these modules declared.
	childAddressSpace = 3 << 30
)

type hostileCase struct {
	name   string // a testdata module, or counts/<case>
	export string // called after the load, when set
	want   error
}

var boundedCases = []hostileCase{
	{name: "locals", want: pluginapi.ErrInvalidPlugin},
	{name: "counts/funcs", want: pluginapi.ErrInvalidPlugin},
	{name: "counts/globals", want: pluginapi.ErrInvalidPlugin},
	{name: "counts/types", want: pluginapi.ErrInvalidPlugin},
	{name: "counts/data", want: pluginapi.ErrInvalidPlugin},
	{name: "counts/elem", want: pluginapi.ErrInvalidPlugin},
	{name: "counts/names", want: pluginapi.ErrInvalidPlugin},
	{name: "counts/table40", want: pluginapi.ErrInvalidPlugin},
	{name: "bigtable", want: pluginapi.ErrInvalidPlugin},
	{name: "tablegrow", export: abi.ExportTruncate, want: pluginapi.ErrTrap},
	{name: "deepnest", want: pluginapi.ErrInvalidPlugin},
	{name: "nomem", want: pluginapi.ErrInvalidPlugin},
	{name: "hiddenmem", want: pluginapi.ErrInvalidPlugin},
	{name: "badimport", want: pluginapi.ErrInvalidPlugin},
	{name: "badinit", want: pluginapi.ErrInvalidPlugin},
	{name: "importmem", want: pluginapi.ErrInvalidPlugin},
	{name: "sleep", export: abi.ExportTruncate, want: pluginapi.ErrDeadlineExceeded},
	{name: "loop", export: abi.ExportTruncate, want: pluginapi.ErrDeadlineExceeded},
	{name: "grow", export: abi.ExportTruncate, want: pluginapi.ErrMemoryLimit},
	{name: "trap", export: abi.ExportTruncate, want: pluginapi.ErrTrap},
}

var errorKinds = []error{
	pluginapi.ErrVersionMismatch, pluginapi.ErrInvalidPlugin, pluginapi.ErrTrap, pluginapi.ErrDeadlineExceeded,
	pluginapi.ErrMemoryLimit, pluginapi.ErrOutputTooLarge, pluginapi.ErrMalformedOutput, pluginapi.ErrPluginError,
}

func kindOf(err error) string {
	if err == nil {
		return "none"
	}
	for _, k := range errorKinds {
		if errors.Is(err, k) {
			return k.Error()
		}
	}
	return "untyped"
}

func TestHostileModulesInABoundedProcess(t *testing.T) {
	if os.Getenv(hostileCaseEnv) != "" {
		t.Skip("in a child")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, tc := range boundedCases {
		t.Run(tc.name, func(t *testing.T) {
			// A hang guard: a child takes well under a second.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, exe, "-test.run=^TestHostileChild$", "-test.v")
			cmd.Env = append(os.Environ(), hostileCaseEnv+"="+tc.name)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "the child died:\n%s", out)
			got := map[string]string{}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "child_") {
					got[k] = v
				}
			}
			assert.Equal(t, tc.want.Error(), got["child_kind"], "child said:\n%s", out)
			t.Logf("%s: %s (address space peak %s)", tc.name, got["child_error"], got["child_vm_peak"])
		})
	}
}

// TestHostileChild is the child of TestHostileModulesInABoundedProcess.
func TestHostileChild(t *testing.T) {
	name := os.Getenv(hostileCaseEnv)
	if name == "" {
		t.Skip("run by TestHostileModulesInABoundedProcess")
	}
	var tc hostileCase
	for _, c := range boundedCases {
		if c.name == name {
			tc = c
		}
	}
	require.Equal(t, name, tc.name, "no case %q", name)
	bin := hostileModule(t, name)
	limit := uint64(childAddressSpace)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}))

	e := newEngine(t, Config{MemoryLimitPages: 64})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := e.Load(ctx, name+".wasm", bin)
	if err == nil && tc.export != "" {
		defer m.Close()
		// Only the deadline cases need a short one; for the others it
		// only keeps a regression from hanging the child.
		timeout := 30 * time.Second
		if tc.want == pluginapi.ErrDeadlineExceeded {
			timeout = 300 * time.Millisecond
		}
		callCtx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		frame, ferr := abi.Encode(&abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: 1})
		require.NoError(t, ferr)
		_, err = m.Call(callCtx, nil, tc.export, frame)
	}
	fmt.Printf("child_kind=%s\nchild_error=%v\nchild_vm_peak=%s\n", kindOf(err), err, vmPeak())
}

// vmPeak is the process's peak address space, from /proc.
func vmPeak() string {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmPeak:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
