package wasmrt

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// Module is a handle to a loaded wasm plugin. It is safe for concurrent
// use; Close releases the handle.
type Module struct {
	*module
	once    sync.Once
	release func()
}

// Close releases this handle; the plugin's runtime closes with the last
// handle of the same bytes.
func (m *Module) Close() { m.once.Do(m.release) }

// module is one compiled plugin in its own runtime.
type module struct {
	cfg      Config
	path     string
	logger   *slog.Logger
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	info     abi.Info
	exports  map[string]bool

	idle chan *instance
	// slots bounds the number of live instances.
	slots chan struct{}

	// interruptible modules carry the host's interrupt check, so a call
	// is stopped by setting the instance's interrupt global; the others
	// run under wazero's check (WithCloseOnContextDone).
	interruptible bool
}

var (
	hostModuleRE = regexp.MustCompile(`^compact_host_v(\d+)$`)
	markerRE     = regexp.MustCompile(`^compact_plugin_abi_v(\d+)$`)
)

const wasiModule = wasi_snapshot_preview1.ModuleName

// memoryExport is the name of the memory every plugin exports
// (abi/README.md, Exports).
const memoryExport = "memory"

func (e *Engine) compile(ctx context.Context, path string, bin []byte) (*module, error) {
	cfg := e.cfg
	fail := func(kind error, format string, args ...any) (*module, error) {
		return nil, &pluginapi.Error{Kind: kind, Path: path, Op: "load", Err: fmt.Errorf(format, args...)}
	}
	// Nothing of the module reaches wazero before its declarations are
	// known to be within the limits (precheck.go).
	shape, err := precheck(bin)
	if err != nil {
		return fail(pluginapi.ErrInvalidPlugin, "%w", err)
	}
	bin = boundTables(bin, shape)
	// The runtime allows the whole 32-bit space and the instance's memory
	// allocator (limitedMemory) enforces the plugin's limit instead: wazero
	// refuses a grow past its own limit without telling anyone, while the
	// allocator can remember that it refused, which tells a memory-limit
	// failure from any other trap.
	//
	// A module is stopped at its deadline by the interrupt check the
	// host adds to it (interrupt.go); one the rewriter cannot handle gets
	// wazero's own check instead.
	m := &module{cfg: cfg, path: path, logger: cfg.Logger.With("path", path)}
	closeOnDone := false
	code, err := instrument(bin)
	if err == nil {
		m.interruptible = true
	} else {
		code, closeOnDone = bin, true
		m.logger.Debug("plugin stopped at deadlines by wazero's check", "reason", err)
	}
	newRuntime := func(closeOnDone bool) wazero.Runtime {
		return wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
			WithCompilationCache(e.cache).
			WithMemoryLimitPages(maxPages).
			WithCloseOnContextDone(closeOnDone))
	}
	m.rt = newRuntime(closeOnDone)
	ok := false
	defer func() {
		if !ok && m.rt != nil {
			_ = m.rt.Close(context.Background())
		}
	}()
	compiled, err := m.compileWithin(ctx, code)
	if err != nil && m.interruptible && ctx.Err() == nil {
		// The rewrite made something the compiler refuses: run the
		// module as it came, under wazero's check.
		m.logger.Debug("instrumented plugin failed to compile", "err", err)
		_ = m.rt.Close(context.Background())
		m.rt, m.interruptible = newRuntime(true), false
		compiled, err = m.compileWithin(ctx, bin)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fail(pluginapi.ErrDeadlineExceeded, "compile: %w (%v)", ctx.Err(), err)
		}
		return fail(pluginapi.ErrInvalidPlugin, "compile: %w", err)
	}
	m.compiled = compiled
	if err := m.checkABI(); err != nil {
		return nil, &pluginapi.Error{Kind: errorKind(err), Path: path, Op: "load", Err: err}
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt); err != nil {
		return fail(pluginapi.ErrInvalidPlugin, "instantiate WASI: %w", err)
	}
	if err := m.instantiateHostModule(ctx); err != nil {
		return fail(pluginapi.ErrInvalidPlugin, "instantiate %s: %w", abi.HostModule, err)
	}
	if err := m.checkImports(); err != nil {
		return fail(pluginapi.ErrInvalidPlugin, "%w", err)
	}
	m.idle = make(chan *instance, cfg.MaxInstances)
	m.slots = make(chan struct{}, cfg.MaxInstances)

	out, err := m.Call(ctx, nil, abi.ExportInfo, nil)
	if err != nil {
		return nil, pluginapi.Located(err, "", path)
	}
	if err := abi.Decode(out, &m.info); err != nil {
		return fail(pluginapi.ErrMalformedOutput, "info: %w", err)
	}
	if m.info.ABIMajor != abi.Major {
		return fail(pluginapi.ErrVersionMismatch, "%w", &pluginapi.VersionError{Want: m.info.ABIMajor, Have: abi.Major})
	}
	for kind, export := range map[string]string{abi.KindStrategy: abi.ExportSummarize, abi.KindTruncator: abi.ExportTruncate} {
		if m.info.Has(kind) && !m.exports[export] {
			return fail(pluginapi.ErrInvalidPlugin, "declares kind %q but does not export %s", kind, export)
		}
	}
	m.logger = m.logger.With("plugin", m.info.Name)
	ok = true
	return m, nil
}

// compileWithin compiles code in m's runtime and returns when ctx is done
// even while wazero still compiles: its compiler looks at ctx only
// between functions, and not at all in its decoder and validator. The
// abandoned compilation finishes in the background (precheck bounds what
// it costs) and closes the runtime; m.rt is then nil.
func (m *module) compileWithin(ctx context.Context, code []byte) (wazero.CompiledModule, error) {
	// With more than one worker wazero's compiler also stops between
	// functions once ctx is done, so an abandoned compilation ends soon.
	ctx = experimental.WithCompilationWorkers(ctx, max(2, runtime.GOMAXPROCS(0)))
	if ctx.Done() == nil {
		return m.rt.CompileModule(ctx, code)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		compiled wazero.CompiledModule
		err      error
	}
	done := make(chan result, 1)
	rt := m.rt
	go func() {
		c, err := rt.CompileModule(ctx, code)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.compiled, r.err
	case <-ctx.Done():
		m.rt = nil
		go func() {
			<-done
			_ = rt.Close(context.Background())
		}()
		return nil, ctx.Err()
	}
}

// Info is what the plugin said about itself at load.
func (m *module) Info() abi.Info { return m.info }

// versionError marks a checkABI failure that is a version mismatch.
type versionError struct{ *pluginapi.VersionError }

func (e versionError) Unwrap() error { return e.VersionError }

func errorKind(err error) error {
	if errors.As(err, new(versionError)) {
		return pluginapi.ErrVersionMismatch
	}
	return pluginapi.ErrInvalidPlugin
}

// checkABI reads the compiled module's imports and exports, before any of
// its code runs: the major version is in their names.
func (m *module) checkABI() error {
	for _, f := range m.compiled.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch {
		case mod == abi.HostModule:
			if !hostFunctions[name] {
				return fmt.Errorf("imports %s.%s, which this host (ABI v%d.%d) does not provide", mod, name, abi.Major, abi.Minor)
			}
		case mod == wasiModule:
		case hostModuleRE.MatchString(mod):
			want, _ := strconv.Atoi(hostModuleRE.FindStringSubmatch(mod)[1])
			return versionError{&pluginapi.VersionError{Want: want, Have: abi.Major}}
		default:
			return fmt.Errorf("imports module %q, which the host does not provide", mod)
		}
	}
	exports := m.compiled.ExportedFunctions()
	if _, ok := exports[abi.ExportMarker]; !ok {
		for name := range exports {
			if sub := markerRE.FindStringSubmatch(name); sub != nil {
				want, _ := strconv.Atoi(sub[1])
				return versionError{&pluginapi.VersionError{Want: want, Have: abi.Major}}
			}
		}
		return fmt.Errorf("does not export %s: not a compact-host plugin", abi.ExportMarker)
	}
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	signatures := map[string][2][]api.ValueType{
		abi.ExportMarker:    {nil, nil},
		"_initialize":       {nil, nil},
		abi.ExportAlloc:     {{i32}, {i32}},
		abi.ExportFree:      {{i32}, nil},
		abi.ExportInfo:      {nil, {i64}},
		abi.ExportSummarize: {{i32, i32}, {i64}},
		abi.ExportTruncate:  {{i32, i32}, {i64}},
	}
	m.exports = map[string]bool{}
	for name, sig := range signatures {
		def, ok := exports[name]
		if !ok {
			continue
		}
		if !equalTypes(def.ParamTypes(), sig[0]) || !equalTypes(def.ResultTypes(), sig[1]) {
			return fmt.Errorf("export %s has signature %v -> %v, want %v -> %v", name,
				typeNames(def.ParamTypes()), typeNames(def.ResultTypes()), typeNames(sig[0]), typeNames(sig[1]))
		}
		m.exports[name] = true
	}
	for _, name := range []string{abi.ExportAlloc, abi.ExportFree, abi.ExportInfo} {
		if !m.exports[name] {
			return fmt.Errorf("does not export %s", name)
		}
	}
	// The host reads requests and answers through the memory the ABI
	// names; without it every pointer would be into nothing.
	mem, ok := m.compiled.ExportedMemories()[memoryExport]
	if !ok {
		return fmt.Errorf("does not export its memory as %q (the ABI's memory export)", memoryExport)
	}
	if mem.Min() > m.cfg.MemoryLimitPages {
		return fmt.Errorf("memory starts at %d pages, over the limit of %d", mem.Min(), m.cfg.MemoryLimitPages)
	}
	return nil
}

// checkImports holds every imported function to the signature of the
// host function it names, once the host modules are in the runtime: a
// mismatch is a load error naming the import, not a failed instance at
// the first call.
func (m *module) checkImports() error {
	for _, f := range m.compiled.ImportedFunctions() {
		modName, name, _ := f.Import()
		host := m.rt.Module(modName)
		if host == nil {
			return fmt.Errorf("imports module %q, which the host does not provide", modName)
		}
		def, ok := host.ExportedFunctionDefinitions()[name]
		if !ok {
			return fmt.Errorf("imports %s.%s, which the host does not provide", modName, name)
		}
		if !equalTypes(def.ParamTypes(), f.ParamTypes()) || !equalTypes(def.ResultTypes(), f.ResultTypes()) {
			return fmt.Errorf("imports %s.%s as %v -> %v, but the host's is %v -> %v", modName, name,
				typeNames(f.ParamTypes()), typeNames(f.ResultTypes()), typeNames(def.ParamTypes()), typeNames(def.ResultTypes()))
		}
	}
	return nil
}

func equalTypes(a, b []api.ValueType) bool { return bytes.Equal(a, b) }

func typeNames(ts []api.ValueType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = api.ValueTypeName(t)
	}
	return out
}

// instance is one instantiation of a module; it serves one call at a time.
type instance struct {
	mod        api.Module
	alloc      api.Function
	free       api.Function
	exports    map[string]api.Function
	memory     *limitedMemory
	stderrTail *tailWriter
	stack      [2]uint64
	// reqPtr and reqCap are the request buffer the host allocated in the
	// instance and keeps across calls; reqPtr is 0 when there is none.
	reqPtr uint32
	reqCap int
	// interrupt is the global of the host's interrupt check, when the
	// module has it: setting it to 1 stops the running call.
	interrupt api.MutableGlobal
	// wake is the Done channel of the context of the call (or the
	// instantiation) the instance is serving, which ends its sleeps.
	wake <-chan struct{}
}

// sleep is the instance's WASI sleep (poll_oneoff with a clock
// subscription): it ends at the deadline of the call it serves, and then
// ends that call, as wazero's check would at the next loop head. Without
// it a plugin asking to sleep an hour held its caller (a serve worker, a
// CLI waiting to exit on SIGTERM) for an hour: time.Sleep honours no
// context. It runs on the goroutine of the call, which set wake.
func (inst *instance) sleep(ns int64) {
	if ns <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-inst.wake:
		panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
	}
}

func (m *module) newInstance(ctx context.Context) (*instance, error) {
	inst := &instance{stderrTail: &tailWriter{}}
	alloc := experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
		inst.memory = &limitedMemory{limit: uint64(m.cfg.MemoryLimitPages) * pageSize}
		return inst.memory
	})
	stdout := &pluginapi.LineWriter{Logger: m.logger.With("stream", "stdout"), Level: slog.LevelInfo}
	stderr := &pluginapi.LineWriter{Logger: m.logger.With("stream", "stderr"), Level: slog.LevelInfo}
	// No file system, environment or arguments: only the clocks, random
	// bytes and the two output streams reach the plugin.
	config := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions("_initialize").
		WithStdout(stdout).
		WithStderr(teeWriter{stderr, inst.stderrTail}).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(inst.sleep).
		WithRandSource(rand.Reader)
	if m.interruptible {
		config = config.WithStartFunctions() // run below, where they can be interrupted
	}
	inst.wake = ctx.Done()
	mod, err := m.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, alloc), m.compiled, config)
	if err != nil {
		return nil, m.callError(ctx, inst, "instantiate", err)
	}
	inst.mod = mod
	if inst.memory != nil && inst.memory.hitLimit {
		_ = mod.Close(context.Background())
		return nil, &pluginapi.Error{Kind: pluginapi.ErrMemoryLimit, Op: "instantiate", Err: fmt.Errorf("initial memory is over %d pages", m.cfg.MemoryLimitPages)}
	}
	if m.interruptible {
		if err := m.start(ctx, inst); err != nil {
			_ = mod.Close(context.Background())
			return nil, err
		}
	}
	inst.alloc = mod.ExportedFunction(abi.ExportAlloc)
	inst.free = mod.ExportedFunction(abi.ExportFree)
	inst.exports = map[string]api.Function{}
	for _, name := range []string{abi.ExportInfo, abi.ExportSummarize, abi.ExportTruncate} {
		if f := mod.ExportedFunction(name); f != nil {
			inst.exports[name] = f
		}
	}
	return inst, nil
}

// get returns an idle instance, or a new one while there are free slots,
// or waits for one.
func (m *module) get(ctx context.Context) (*instance, error) {
	select {
	case inst := <-m.idle:
		return inst, nil
	default:
	}
	select {
	case inst := <-m.idle:
		return inst, nil
	case m.slots <- struct{}{}:
		inst, err := m.newInstance(ctx)
		if err != nil {
			<-m.slots
			return nil, err
		}
		return inst, nil
	case <-ctx.Done():
		return nil, &pluginapi.Error{Kind: pluginapi.ErrDeadlineExceeded, Op: "wait for an instance", Err: ctx.Err()}
	}
}

// put returns a healthy instance to the pool, or drops it when its memory
// grew past the recycle size: Go plugins never give memory back, so a big
// call would otherwise pin that memory for the instance's life.
func (m *module) put(inst *instance) {
	if inst.mod.Memory() != nil && uint64(inst.mod.Memory().Size()) > m.cfg.RecycleBytes {
		m.discard(inst)
		return
	}
	m.idle <- inst
}

func (m *module) discard(inst *instance) {
	if inst.mod != nil {
		_ = inst.mod.Close(context.Background())
	}
	<-m.slots
}

// close closes the runtime.
func (m *module) close(ctx context.Context) { _ = m.rt.Close(ctx) }

// callKey carries the callState of a call to the host functions.
type callKey struct{}

type callState struct {
	svc     pluginapi.Services
	pending []byte // answer of the last host call, waiting for result
}

// Call runs export with the request frame and returns a copy of the
// answer frame. ctx bounds the call: when it is done the module's code is
// stopped and the instance discarded. svc answers the plugin's host calls.
func (m *module) Call(ctx context.Context, svc pluginapi.Services, export string, frame []byte) ([]byte, error) {
	out, err := m.callExport(ctx, svc, export, frame)
	if err != nil {
		err = asDeadline(ctx, "", pluginapi.OpName(export), err)
	}
	return out, err
}

func (m *module) callExport(ctx context.Context, svc pluginapi.Services, export string, frame []byte) ([]byte, error) {
	inst, err := m.get(ctx)
	if err != nil {
		return nil, err
	}
	fn := inst.exports[export]
	if fn == nil {
		m.put(inst)
		return nil, &pluginapi.Error{Kind: pluginapi.ErrPluginError, Op: pluginapi.OpName(export),
			Err: abi.Errorf(abi.CodeUnsupported, "plugin does not export %s", export)}
	}
	inst.wake = ctx.Done()
	callCtx := context.WithValue(ctx, callKey{}, &callState{svc: svc})
	if m.interruptible && ctx.Done() != nil {
		return m.callInterruptible(callCtx, inst, fn, export, frame)
	}
	out, err := m.call(callCtx, inst, fn, export, frame)
	m.done(inst, err)
	return out, err
}

// done returns inst to the pool after its call, or discards it when the
// call failed in a way that may have left it unsound. An answer refused
// for its size leaves the instance as sound as any answer: it stays the
// plugin's until its next call.
func (m *module) done(inst *instance, err error) {
	var pe *pluginapi.Error
	if err != nil && !(errors.As(err, &pe) && pe.Kind == pluginapi.ErrOutputTooLarge) {
		m.discard(inst)
		return
	}
	m.put(inst)
}

// start runs the start function (which the rewriter exports as
// startExport) and _initialize of a new instance of an interruptible
// module, stopped like a call when ctx is done.
func (m *module) start(ctx context.Context, inst *instance) error {
	g, ok := inst.mod.ExportedGlobal(interruptExport).(api.MutableGlobal)
	if !ok {
		return &pluginapi.Error{Kind: pluginapi.ErrInvalidPlugin, Op: "instantiate", Err: fmt.Errorf("the interrupt global %s is missing", interruptExport)}
	}
	inst.interrupt = g
	for _, name := range []string{startExport, "_initialize"} {
		fn := inst.mod.ExportedFunction(name)
		if fn == nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return &pluginapi.Error{Kind: pluginapi.ErrDeadlineExceeded, Op: "instantiate", Err: err}
		}
		var err error
		if interruptibly(ctx, inst, func() { err = fn.CallWithStack(ctx, nil) }) && err == nil {
			// Finished as the deadline passed, but the interrupt is set:
			// the instance would trap in its first loop.
			return &pluginapi.Error{Kind: pluginapi.ErrDeadlineExceeded, Op: "instantiate", Err: ctx.Err()}
		}
		if err != nil {
			return m.callError(ctx, inst, "instantiate", err)
		}
	}
	return nil
}

// interruptibly runs f on this goroutine and sets inst's interrupt global
// if ctx is done first, which stops the module's code at its next loop
// head. Nothing runs per call but the registration of that function on
// ctx: no goroutine, no timer. It reports whether the interrupt was set,
// after which the instance cannot serve again.
func interruptibly(ctx context.Context, inst *instance, f func()) (interrupted bool) {
	if ctx.Done() == nil {
		f()
		return false
	}
	stop := context.AfterFunc(ctx, func() { inst.interrupt.Set(1) })
	f()
	return !stop()
}

// callInterruptible runs a call of a module with the interrupt check.
func (m *module) callInterruptible(ctx context.Context, inst *instance, fn api.Function, export string, frame []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		m.put(inst) // not run: the instance is as it was
		return nil, &pluginapi.Error{Kind: pluginapi.ErrDeadlineExceeded, Op: pluginapi.OpName(export), Err: err}
	}
	var (
		out []byte
		err error
	)
	if interruptibly(ctx, inst, func() { out, err = m.call(ctx, inst, fn, export, frame) }) {
		m.discard(inst) // an answer completed before the interrupt is still good
		return out, err
	}
	m.done(inst, err)
	return out, err
}

// keepRequestBytes is the largest request buffer an instance keeps for
// the next call; a larger one is freed after its call so the plugin can
// reuse that memory.
const keepRequestBytes = 64 << 10

// minRequestBytes is the smallest request buffer allocated, so that small
// requests of varying sizes share one buffer.
const minRequestBytes = 4 << 10

// call runs one export. In the steady state it is a single entry into the
// module: the request goes into the buffer kept from the instance's last
// call, and the answer stays the plugin's (see abi/README.md, Memory
// ownership), so neither alloc nor free runs.
func (m *module) call(ctx context.Context, inst *instance, fn api.Function, export string, frame []byte) ([]byte, error) {
	op := pluginapi.OpName(export)
	stack := inst.stack[:]
	if export != abi.ExportInfo {
		if err := m.requestBuffer(ctx, inst, op, len(frame)); err != nil {
			return nil, err
		}
		if !inst.mod.Memory().Write(inst.reqPtr, frame) {
			return nil, &pluginapi.Error{Kind: pluginapi.ErrMalformedOutput, Op: op,
				Err: fmt.Errorf("%s returned %#x, which cannot hold %d bytes inside the plugin's memory", abi.ExportAlloc, inst.reqPtr, len(frame))}
		}
		stack[0], stack[1] = uint64(inst.reqPtr), uint64(len(frame))
	}
	if err := fn.CallWithStack(ctx, stack); err != nil {
		return nil, m.callError(ctx, inst, op, err)
	}
	outPtr, outLen := uint32(stack[0]>>32), uint32(stack[0])
	if uint64(outLen) > uint64(m.cfg.MaxOutputBytes) {
		return nil, &pluginapi.Error{Kind: pluginapi.ErrOutputTooLarge, Op: op,
			Err: fmt.Errorf("answer of %d bytes is over the %d byte limit", outLen, m.cfg.MaxOutputBytes)}
	}
	view, ok := inst.mod.Memory().Read(outPtr, outLen)
	if !ok {
		return nil, &pluginapi.Error{Kind: pluginapi.ErrMalformedOutput, Op: op,
			Err: fmt.Errorf("answer at %#x (%d bytes) is outside the plugin's memory", outPtr, outLen)}
	}
	out := bytes.Clone(view)
	if inst.reqCap > keepRequestBytes {
		if err := m.freeRequest(ctx, inst, op); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// requestBuffer makes sure inst has a request buffer of at least size
// bytes, replacing a smaller one.
func (m *module) requestBuffer(ctx context.Context, inst *instance, op string, size int) error {
	if inst.reqCap >= size && inst.reqPtr != 0 {
		return nil
	}
	if inst.reqPtr != 0 {
		if err := m.freeRequest(ctx, inst, op); err != nil {
			return err
		}
	}
	want := max(size, minRequestBytes)
	stack := inst.stack[:]
	stack[0] = uint64(want)
	if err := inst.alloc.CallWithStack(ctx, stack); err != nil {
		return m.callError(ctx, inst, op, err)
	}
	inst.reqPtr, inst.reqCap = uint32(stack[0]), want
	return nil
}

// freeRequest gives the request buffer back to the plugin.
func (m *module) freeRequest(ctx context.Context, inst *instance, op string) error {
	stack := inst.stack[:]
	stack[0] = uint64(inst.reqPtr)
	inst.reqPtr, inst.reqCap = 0, 0
	if err := inst.free.CallWithStack(ctx, stack); err != nil {
		return m.callError(ctx, inst, op, err)
	}
	return nil
}

// callError classifies a failed call into one of the typed errors.
func (m *module) callError(ctx context.Context, inst *instance, op string, err error) error {
	kind := pluginapi.ErrTrap
	var exit *sys.ExitError
	switch {
	case ctx.Err() != nil:
		kind, err = pluginapi.ErrDeadlineExceeded, fmt.Errorf("%w (%v)", ctx.Err(), err)
	case errors.As(err, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled):
		kind = pluginapi.ErrDeadlineExceeded
	case inst.memory != nil && inst.memory.hitLimit:
		kind, err = pluginapi.ErrMemoryLimit, fmt.Errorf("grew past %d pages: %w", m.cfg.MemoryLimitPages, err)
	case errors.Is(err, errOutOfBounds):
		kind = pluginapi.ErrMalformedOutput
	case exit != nil:
		err = fmt.Errorf("plugin exited with code %d: %s", exit.ExitCode(), inst.stderrTail.String())
	}
	return &pluginapi.Error{Kind: kind, Op: op, Err: err}
}

const (
	pageSize = 65536
	maxPages = 65536 // 4 GiB, all a wasm32 module can address
)

// limitedMemory backs an instance's linear memory and refuses to grow past
// the plugin's limit, remembering that it did.
type limitedMemory struct {
	limit    uint64
	buf      []byte
	hitLimit bool
}

func (l *limitedMemory) Reallocate(size uint64) []byte {
	if size > l.limit {
		l.hitLimit = true
		return nil
	}
	if size <= uint64(cap(l.buf)) {
		l.buf = l.buf[:size]
		return l.buf
	}
	// Grow geometrically like append, bounded by the limit, so a module
	// growing page by page does not copy its memory each time. The first
	// allocation, at instantiation, keeps room for four times the initial
	// memory: a Go module starts at about 3 MiB and grows to 6–17 MiB in
	// a large summary, and every growth is a copy and a large allocation
	// in the host's heap in the middle of a call, which could set off the
	// host's GC and turn a 7 ms call into a 30 ms one.
	newCap := max(size, uint64(cap(l.buf))*2)
	if l.buf == nil {
		newCap = size * 4
	}
	newCap = min(newCap, l.limit)
	buf := make([]byte, size, newCap)
	copy(buf, l.buf)
	l.buf = buf
	return l.buf
}

func (l *limitedMemory) Free() { l.buf = nil }

// tailWriter keeps the last bytes written to it, to quote a plugin's last
// words (a Go panic, "out of memory") in the error of its exit.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 1024

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.a.Write(p)
	return t.b.Write(p)
}
