package wasmrt

import (
	"bytes"
	"context"
	"errors"

	"github.com/tetratelabs/wazero/api"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// errOutOfBounds is the panic value of a host function handed a pointer
// and length outside the plugin's memory; wazero turns it into the call's
// error, classified as malformed output.
var errOutOfBounds = errors.New("pointer and length are outside the plugin's memory")

var hostFunctions = map[string]bool{abi.HostCall: true, abi.HostResult: true, abi.HostLog: true, abi.HostDeadline: true}

// Results of HostCall below zero.
const (
	callErrBadPointer = -1 // the request is outside the plugin's memory
	callErrNoCall     = -2 // called outside of a plugin call
)

// instantiateHostModule defines compact_host_v1 in m's runtime. The
// functions find the call they serve through their context, so one host
// module serves every instance.
func (m *module) instantiateHostModule(ctx context.Context) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	_, err := m.rt.NewHostModuleBuilder(abi.HostModule).
		// call(op i32, ptr i32, len i32) -> i64: answers the request frame
		// at ptr with a response or error frame the plugin fetches with
		// result; returns its length, or a negative code.
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(m.hostCall), []api.ValueType{i32, i32, i32}, []api.ValueType{i64}).
		WithParameterNames("op", "ptr", "len").Export(abi.HostCall).
		// result(ptr i32, len i32) -> i32: copies the pending answer of
		// the last call to ptr and returns the bytes copied.
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostResult), []api.ValueType{i32, i32}, []api.ValueType{i32}).
		WithParameterNames("ptr", "len").Export(abi.HostResult).
		// log(level i32, ptr i32, len i32): one line of the host's log,
		// level as in log/slog.
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(m.hostLog), []api.ValueType{i32, i32, i32}, nil).
		WithParameterNames("level", "ptr", "len").Export(abi.HostLog).
		// deadline() -> i64: unix nanoseconds of the call's deadline, 0
		// when it has none.
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostDeadline), nil, []api.ValueType{i64}).
		Export(abi.HostDeadline).
		Instantiate(ctx)
	return err
}

func (m *module) hostCall(ctx context.Context, mod api.Module, stack []uint64) {
	op, ptr, size := uint32(stack[0]), uint32(stack[1]), uint32(stack[2])
	state, _ := ctx.Value(callKey{}).(*callState)
	if state == nil {
		stack[0] = api.EncodeI64(callErrNoCall)
		return
	}
	view, ok := mod.Memory().Read(ptr, size)
	if !ok {
		stack[0] = api.EncodeI64(callErrBadPointer)
		return
	}
	// Decoded byte fields alias the frame; the copy keeps the services
	// from holding on to plugin memory.
	state.pending = pluginapi.ServeHostCall(ctx, state.svc, op, bytes.Clone(view))
	stack[0] = api.EncodeI64(int64(len(state.pending)))
}

func hostResult(ctx context.Context, mod api.Module, stack []uint64) {
	ptr, size := uint32(stack[0]), uint32(stack[1])
	state, _ := ctx.Value(callKey{}).(*callState)
	if state == nil {
		stack[0] = 0
		return
	}
	n := min(int(size), len(state.pending))
	if !mod.Memory().Write(ptr, state.pending[:n]) {
		panic(errOutOfBounds)
	}
	state.pending = nil
	stack[0] = api.EncodeU32(uint32(n))
}

func (m *module) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, size := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	view, ok := mod.Memory().Read(ptr, size)
	if !ok {
		panic(errOutOfBounds)
	}
	const maxLine = 8 << 10
	if len(view) > maxLine {
		view = view[:maxLine]
	}
	m.logger.Log(ctx, pluginapi.LogLevel(int(level)), string(view))
}

func hostDeadline(ctx context.Context, _ api.Module, stack []uint64) {
	var unixNanos int64
	if d, ok := ctx.Deadline(); ok {
		unixNanos = d.UnixNano()
	}
	stack[0] = api.EncodeI64(unixNanos)
}
