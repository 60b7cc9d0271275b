package wasmrt

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/builtin"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// plugins returns every real module the tests have: the hostile ones, the
// SDK's testplug, the built-ins and the C example.
func plugins(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{"testplug": testplug(t)}
	entries, _ := hostile.ReadDir("testdata")
	for _, e := range entries {
		out[e.Name()] = hostileBin(t, e.Name()[:len(e.Name())-len(".wasm")])
	}
	for _, name := range builtin.Names() {
		b, ok := builtin.Wasm(name)
		if !ok {
			t.Fatalf("no module for built-in %s", name)
		}
		out["builtin "+name] = b
	}
	c, err := os.ReadFile("../../../examples/c-truncator/logdedup.wasm")
	if err != nil {
		t.Fatal(err)
	}
	out["logdedup"] = c
	return out
}

// Every module the project has is rewritten, and the rewrite compiles
// and keeps every export.
func TestInstrumentEveryPlugin(t *testing.T) {
	rt := wazero.NewRuntime(context.Background())
	defer rt.Close(context.Background())
	for name, bin := range plugins(t) {
		out, err := instrument(bin)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		compiled, err := rt.CompileModule(context.Background(), out)
		if err != nil {
			t.Errorf("%s: the rewrite does not compile: %v", name, err)
			continue
		}
		original, err := rt.CompileModule(context.Background(), bin)
		if err != nil {
			t.Fatal(err)
		}
		for export := range original.ExportedFunctions() {
			if _, ok := compiled.ExportedFunctions()[export]; !ok {
				t.Errorf("%s: lost its export %s", name, export)
			}
		}
		if !bytes.Contains(out, []byte(interruptExport)) {
			t.Errorf("%s: the interrupt global is not exported", name)
		}
	}
}

// A loop is stopped, even while the collector needs every P (which the
// loop must let it have) and with one P only (where the goroutine that
// sets the interrupt must get the P from the loop); the next call works.
func TestInterruptStopsALoopAndTheNextCallWorks(t *testing.T) {
	m := load(t, newEngine(t, Config{MaxInstances: 1}), hostileBin(t, "loop"))
	if !m.interruptible {
		t.Fatal("loop.wasm was not instrumented")
	}
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
		if !errors.Is(err, pluginapi.ErrDeadlineExceeded) {
			t.Fatalf("got %v, want ErrDeadlineExceeded", err)
		}
	}
	// The pool's one slot was given back each time: info still answers.
	if _, err := m.Call(context.Background(), nil, abi.ExportInfo, nil); err != nil {
		t.Fatal(err)
	}
}

// A module the rewriter refuses (here one that already exports the name
// of the interrupt global) runs under wazero's check and is still stopped.
func TestUninstrumentableModuleIsStoppedByWazero(t *testing.T) {
	bin, err := instrument(hostileBin(t, "loop"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := instrument(bin); !errors.Is(err, errNotInstrumentable) {
		t.Fatalf("instrumenting twice: %v", err)
	}
	m := load(t, newEngine(t, Config{}), bin)
	if m.interruptible {
		t.Fatal("the module was instrumented twice")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.Call(ctx, nil, abi.ExportTruncate, []byte("x")); !errors.Is(err, pluginapi.ErrDeadlineExceeded) {
		t.Fatalf("got %v, want ErrDeadlineExceeded", err)
	}
}

func TestCallWithADoneContextDoesNotRun(t *testing.T) {
	m := load(t, newEngine(t, Config{MaxInstances: 1}), testplug(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := truncate(t, ctx, m, nil, "noop", []byte("x"), 10); !errors.Is(err, pluginapi.ErrDeadlineExceeded) {
		t.Fatalf("got %v, want ErrDeadlineExceeded", err)
	}
	inst := <-m.idle // the instance went back unused
	m.idle <- inst
	if inst.reqPtr != 0 {
		t.Fatal("the cancelled call wrote its request")
	}
}

// FuzzInstrument rewrites arbitrary bytes: no panic, and whatever wazero
// compiles before the rewrite it compiles after.
func FuzzInstrument(f *testing.F) {
	for _, bin := range plugins(f) {
		f.Add(bin)
	}
	rt := wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfig().WithCompilationCache(wazero.NewCompilationCache()))
	f.Fuzz(func(t *testing.T, bin []byte) {
		out, err := instrument(bin)
		if err != nil {
			if !errors.Is(err, errNotInstrumentable) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		before, err := rt.CompileModule(context.Background(), bin)
		if err != nil {
			return
		}
		before.Close(context.Background())
		after, err := rt.CompileModule(context.Background(), out)
		if err != nil {
			t.Fatalf("compiles, but not after the rewrite: %v", err)
		}
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
		if !errors.Is(err, pluginapi.ErrDeadlineExceeded) {
			t.Errorf("%s: got %v, want ErrDeadlineExceeded", name, err)
		}
	}
}
