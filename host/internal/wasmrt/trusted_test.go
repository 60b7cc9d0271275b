package wasmrt

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// gateHandler is a slog handler that holds every record with the message
// msg until the test opens the gate: a plugin logging it is then provably
// still running inside that host call.
type gateHandler struct {
	msg     string
	entered chan struct{}
	gate    chan struct{}
}

func newGate(msg string) *gateHandler {
	return &gateHandler{msg: msg, entered: make(chan struct{}, 16), gate: make(chan struct{})}
}

func (h *gateHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *gateHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *gateHandler) WithGroup(string) slog.Handler            { return h }

func (h *gateHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.entered <- struct{}{}
		<-h.gate
	}
	return nil
}

// waitFor polls cond; the bound only keeps a regression from hanging.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
	}
}

func (m *module) abandonedCalls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.abandoned
}

// abandonCall loads testplug trusted, with one instance, and leaves a call
// abandoned: the plugin is held inside its host log call (testplug's
// "callhost" logs before it calls the model) while the caller's context
// is cancelled. It returns the module, the abandoned instance and the gate
// that lets the plugin go on.
func abandonCall(t *testing.T) (*Module, *instance, *gateHandler) {
	t.Helper()
	gate := newGate("calling the host model")
	e := newEngine(t, Config{MaxInstances: 1, Logger: slog.New(gate)})
	m, err := e.LoadTrusted(context.Background(), "testplug.wasm", testplug(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(gate.gate); m.Close() })
	if !m.Trusted() {
		t.Fatal("LoadTrusted gave an untrusted module")
	}
	inst := <-m.idle // the instance of the info call at load
	m.idle <- inst

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := truncate(t, ctx, m, nil, "callhost", []byte("x"), 10)
		errc <- err
	}()
	<-gate.entered
	cancel()
	select {
	case err = <-errc:
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not return when its context was done")
	}
	if !errors.Is(err, pluginapi.ErrDeadlineExceeded) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrDeadlineExceeded for the cancelled context", err)
	}
	// The call returned while the plugin is still held in the host call.
	if n := m.abandonedCalls(); n != 1 {
		t.Fatalf("%d abandoned calls, want 1", n)
	}
	if len(m.idle) != 0 || inst.mod.IsClosed() {
		t.Fatal("the abandoned instance is back in the pool or closed under running code")
	}
	return m, inst, gate
}

func TestTrustedCallReturnsAtDeadlineAndDiscardsItsInstance(t *testing.T) {
	m, inst, gate := abandonCall(t)
	gate.gate <- struct{}{} // the plugin returns from log, then fails its model call
	waitFor(t, "the abandoned call to return", func() bool { return m.abandonedCalls() == 0 })
	if !inst.mod.IsClosed() {
		t.Fatal("the instance of an abandoned call was not closed when it returned")
	}
	if len(m.slots) != 0 || len(m.idle) != 0 {
		t.Fatalf("pool holds %d slots and %d idle instances, want none", len(m.slots), len(m.idle))
	}
	// The next call gets a new instance.
	resp, err := truncate(t, context.Background(), m, nil, "generic", []byte("fine"), 10)
	if err != nil || string(resp.Content) != "fine" {
		t.Fatalf("call after an abandoned one: %v %v", resp, err)
	}
	if next := <-m.idle; next == inst {
		t.Fatal("the abandoned instance was reused")
	}
}

func TestTrustedCallWithADoneContextDoesNotRun(t *testing.T) {
	e := newEngine(t, Config{MaxInstances: 1})
	m, err := e.LoadTrusted(context.Background(), "testplug.wasm", testplug(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := truncate(t, ctx, m, nil, "generic", []byte("x"), 10); !errors.Is(err, pluginapi.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want ErrDeadlineExceeded", err)
	}
	if m.abandonedCalls() != 0 || len(m.idle) != 1 {
		t.Fatal("a call whose context was done before it started was run")
	}
}

func TestTrustedModuleClosesAfterItsAbandonedCalls(t *testing.T) {
	m, inst, gate := abandonCall(t)
	mod := m.module
	m.Close() // the last handle: the runtime must outlive the running call
	if inst.mod.IsClosed() {
		t.Fatal("closing the module closed an instance whose code still runs")
	}
	gate.gate <- struct{}{}
	waitFor(t, "the abandoned call to return", func() bool { return mod.abandonedCalls() == 0 })
	// The runtime is closed now: it instantiates nothing more.
	waitFor(t, "the runtime to close", func() bool {
		inst, err := mod.newInstance(context.Background())
		if err == nil {
			_ = inst.mod.Close(context.Background())
		}
		return err != nil
	})
}

func TestTrustedAndUntrustedLoadsAreApart(t *testing.T) {
	e := newEngine(t, Config{})
	bin := hostileBin(t, "mirror")
	untrusted := load(t, e, bin)
	trusted, err := e.LoadTrusted(context.Background(), "mirror.wasm", bin)
	if err != nil {
		t.Fatal(err)
	}
	defer trusted.Close()
	if untrusted.Trusted() || !trusted.Trusted() || untrusted.module == trusted.module {
		t.Fatal("the same bytes loaded trusted and untrusted share a module")
	}
	frame, _ := abi.Encode(&abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := trusted.Call(ctx, nil, abi.ExportTruncate, frame)
	if err != nil || string(out) != string(frame) {
		t.Fatalf("trusted mirror call: %q, %v", out, err)
	}
}
