package wasmrt

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/builtin"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
	"github.com/compact-host/compact-host/internal/testwasm"
)

// plugins returns every real module the tests have that the host's
// pre-check lets through to wazero: the hostile ones, the SDK's testplug,
// the built-ins and the C example. (The others would make wazero itself
// allocate gigabytes.)
func plugins(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{"testplug": testplug(t)}
	entries, err := hostile.ReadDir("testdata")
	require.NoError(t, err)
	for _, e := range entries {
		b := hostileBin(t, e.Name()[:len(e.Name())-len(".wasm")])
		if _, err := precheck(b); err == nil {
			out[e.Name()] = b
		}
	}
	for _, name := range builtin.Names() {
		b, ok := builtin.Wasm(name)
		require.True(t, ok, "no module for built-in %s", name)
		out["builtin "+name] = b
	}
	c, err := os.ReadFile("../../../examples/c-truncator/logdedup.wasm")
	require.NoError(t, err)
	out["logdedup"] = c
	return out
}

// Every module the project has is rewritten, and the rewrite compiles
// and keeps every export.
func TestInstrumentEveryPlugin(t *testing.T) {
	rt := testwasm.NewRuntime(t)
	for name, bin := range plugins(t) {
		out, err := instrument(bin)
		if !assert.NoError(t, err, name) {
			continue
		}
		compiled, err := rt.CompileModule(context.Background(), out)
		if !assert.NoError(t, err, "%s: the rewrite does not compile", name) {
			continue
		}
		original, err := rt.CompileModule(context.Background(), bin)
		require.NoError(t, err, name)
		for export := range original.ExportedFunctions() {
			assert.Contains(t, compiled.ExportedFunctions(), export, "%s lost an export", name)
		}
		assert.True(t, bytes.Contains(out, []byte(interruptExport)), "%s: the interrupt global is not exported", name)
	}
}

// A loop is stopped, even while the collector needs every P (which the
// loop must let it have) and with one P only (where the goroutine that
// sets the interrupt must get the P from the loop); the next call works.
func TestInterruptStopsALoopAndTheNextCallWorks(t *testing.T) {
	m := load(t, newEngine(t, Config{MaxInstances: 1}), hostileBin(t, "loop"))
	require.True(t, m.interruptible, "loop.wasm was not instrumented")
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			default:
				runtime.GC()
			}
		}
	}()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{2, 1, 1} {
		runtime.GOMAXPROCS(procs)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := m.Call(ctx, nil, abi.ExportTruncate, []byte("x"))
		cancel()
		require.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded, "with %d Ps", procs)
	}
	// The pool's one slot was given back each time: info still answers.
	_, err := m.Call(context.Background(), nil, abi.ExportInfo, nil)
	assert.NoError(t, err)
}

// A module the rewriter refuses (here one that already exports the name
// of the interrupt global) runs under wazero's check and is still stopped.
func TestUninstrumentableModuleIsStoppedByWazero(t *testing.T) {
	bin, err := instrument(hostileBin(t, "loop"))
	require.NoError(t, err)
	_, err = instrument(bin)
	require.ErrorIs(t, err, errNotInstrumentable, "instrumenting twice")
	m := load(t, newEngine(t, Config{}), bin)
	require.False(t, m.interruptible, "the module was instrumented twice")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = m.Call(ctx, nil, abi.ExportTruncate, []byte("x"))
	assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
}

func TestCallWithADoneContextDoesNotRun(t *testing.T) {
	m := load(t, newEngine(t, Config{MaxInstances: 1}), testplug(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := truncate(t, ctx, m, nil, "noop", []byte("x"), 10)
	require.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
	inst := <-m.idle // the instance went back unused
	m.idle <- inst
	assert.Zero(t, inst.reqPtr, "the cancelled call wrote its request")
}

// FuzzInstrument rewrites arbitrary bytes: no panic, and whatever wazero
// compiles before the rewrite it compiles after. Like the host, it hands
// wazero only what passes the pre-check.
func FuzzInstrument(f *testing.F) {
	for _, bin := range plugins(f) {
		f.Add(bin)
	}
	rt := wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfig().WithCompilationCache(testwasm.FuzzCache(f)))
	defer rt.Close(context.Background())
	f.Fuzz(func(t *testing.T, bin []byte) {
		out, err := instrument(bin)
		if err != nil {
			require.ErrorIs(t, err, errNotInstrumentable, "untyped error")
			return
		}
		if _, err := precheck(bin); err != nil {
			return
		}
		before, err := rt.CompileModule(context.Background(), bin)
		if err != nil {
			return
		}
		before.Close(context.Background())
		after, err := rt.CompileModule(context.Background(), out)
		require.NoError(t, err, "compiles, but not after the rewrite")
		after.Close(context.Background())
	})
}

// Code that runs when an instance is made (a start function, _initialize)
// is stopped at the deadline of the load or call that makes the instance.
func TestLoopAtInstantiationIsStopped(t *testing.T) {
	for _, name := range []string{"initloop", "startloop"} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := newEngine(t, Config{}).Load(ctx, name+".wasm", hostileBin(t, name))
		cancel()
		assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded, name)
	}
}
