//go:build wasip1

package sdk

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/compact-host/compact-host/abi"
)

// A reactor built with -buildmode=c-shared runs package initialisation in
// _initialize but never main.main. Plugin authors still write one main for
// both transports, so the SDK runs main.main itself on the first export
// call; Serve then only records the plugin and returns.
//
//go:linkname runMain main.main
func runMain()

var (
	served  *Plugin
	mainRan bool
	// live keeps every buffer alloc handed to the host reachable, keyed
	// by its address, until it is freed: Go's collector does not move
	// objects, so the address stays valid while the slice is referenced.
	live = map[uint32][]byte{}
	// lastAnswer keeps the previous call's answer reachable: the host may
	// read it until this instance's next call (abi/README.md, Memory
	// ownership).
	lastAnswer []byte
)

// Serve publishes p. Under wasip1 it records p for the exports of this
// package and returns; the host drives the plugin through those exports.
func Serve(p *Plugin) { served = p }

func plugin() *Plugin {
	if served == nil && !mainRan {
		mainRan = true
		runMain()
	}
	return served
}

//go:wasmexport compact_plugin_abi_v1
func abiMarker() {}

//go:wasmexport compact_v1_alloc
func alloc(size uint32) uint32 {
	if size == 0 {
		size = 1
	}
	b := make([]byte, size)
	ptr := addr(b)
	live[ptr] = b
	return ptr
}

//go:wasmexport compact_v1_free
func free(ptr uint32) { delete(live, ptr) }

//go:wasmexport compact_v1_info
func info() uint64 { return call(abi.ExportInfo, 0, 0) }

//go:wasmexport compact_v1_summarize
func summarize(ptr, size uint32) uint64 { return call(abi.ExportSummarize, ptr, size) }

//go:wasmexport compact_v1_truncate
func truncate(ptr, size uint32) uint64 { return call(abi.ExportTruncate, ptr, size) }

// call handles one export. The request buffer is the host's: it may reuse
// it for the next call, so nothing decoded from it outlives the call. The
// answer stays live until the next call, which drops it.
func call(export string, ptr, size uint32) uint64 {
	lastAnswer = nil
	var out []byte
	p := plugin()
	switch {
	case p == nil:
		out = abi.MustEncodeError(abi.Errorf(abi.CodeInternal, "main did not call sdk.Serve"))
	default:
		var frame []byte
		if export != abi.ExportInfo {
			buf, ok := live[ptr]
			if !ok || uint64(size) > uint64(len(buf)) {
				out = abi.MustEncodeError(abi.Errorf(abi.CodeInvalidRequest, "request at %#x (%d bytes) was not allocated by %s", ptr, size, abi.ExportAlloc))
				break
			}
			frame = buf[:size]
		}
		ctx := newCallContext(hostDeadline())
		out = p.Handle(ctx, wasmHost, export, frame)
	}
	lastAnswer = out
	return uint64(addr(out))<<32 | uint64(len(out))
}

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

//go:wasmimport compact_host_v1 call
func hostCall(op, ptr, size uint32) int64

//go:wasmimport compact_host_v1 result
func hostResult(ptr, size uint32) uint32

//go:wasmimport compact_host_v1 log
func hostLog(level int32, ptr, size uint32)

//go:wasmimport compact_host_v1 deadline
func hostDeadline() int64

var wasmHost = &FrameHost{
	Call: func(_ context.Context, op uint32, frame []byte) ([]byte, error) {
		n := hostCall(op, addr(frame), uint32(len(frame)))
		runtime.KeepAlive(frame)
		if n < 0 {
			return nil, abi.Errorf(abi.CodeInvalidRequest, "host refused operation %d (code %d)", op, -n)
		}
		out := make([]byte, n)
		if n > 0 {
			hostResult(addr(out), uint32(n))
		}
		return out, nil
	},
	LogFunc: func(level slog.Level, msg string) {
		b := []byte(msg)
		if len(b) == 0 {
			return
		}
		hostLog(int32(level), addr(b), uint32(len(b)))
		runtime.KeepAlive(b)
	},
}

// callContext carries the host's deadline into plugin code. A wasm module
// has one thread and the host does not return to the Go scheduler during a
// call, so a timer-based context would never fire; Err reads the clock
// instead. Done is closed the first time Err sees the deadline pass.
type callContext struct {
	deadline time.Time
	done     chan struct{}
	once     sync.Once
}

func newCallContext(unixNanos int64) context.Context {
	if unixNanos <= 0 {
		return context.Background()
	}
	return &callContext{deadline: time.Unix(0, unixNanos), done: make(chan struct{})}
}

func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *callContext) Done() <-chan struct{}       { return c.done }
func (c *callContext) Value(any) any               { return nil }
func (c *callContext) Err() error {
	if time.Now().Before(c.deadline) {
		return nil
	}
	c.once.Do(func() { close(c.done) })
	return context.DeadlineExceeded
}
