package wasmrt

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// BenchmarkGoPluginCall calls testplug, built with the SDK, directly and
// without a deadline: what is left of a warm call is the host's copying
// and the plugin's own code inside wasm, the SDK's codec and runtime.
//
//	go test -run '^$' -bench GoPluginCall ./host/internal/wasmrt/
func BenchmarkGoPluginCall(b *testing.B) {
	m := load(b, newEngine(b, Config{MaxInstances: 1}), testplug(b))
	frame, err := abi.Encode(&abi.TruncateRequest{Category: "noop", Content: []byte("ok"), MaxTokens: 2})
	require.NoError(b, err)
	for name, call := range map[string]struct {
		export string
		frame  []byte
	}{"truncate-noop": {abi.ExportTruncate, frame}, "info": {abi.ExportInfo, nil}} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_, err := m.Call(context.Background(), nil, call.export, call.frame)
				require.NoError(b, err)
			}
		})
	}
}

// BenchmarkLoadDeepNesting loads, in a new engine each time, a plugin
// with a function nesting 100,000 blocks: what a cold load of it costs
// before the host's verdict. wazero alone took 40 s to over ten minutes
// to compile it.
//
//	go test -run '^$' -bench LoadDeepNesting -benchtime 3x ./host/internal/wasmrt/
func BenchmarkLoadDeepNesting(b *testing.B) {
	bin := nestedModule(1, 100_000)
	for b.Loop() {
		_, err := newEngine(b, Config{}).Load(context.Background(), "deep.wasm", bin)
		require.Error(b, err)
	}
}

// nestedModule is a plugin with, after its four ABI functions, n
// functions each nesting depth blocks.
func nestedModule(n, depth int) []byte {
	section := func(out []byte, id byte, body []byte) []byte {
		out = appendU32(append(out, id), uint32(len(body)))
		return append(out, body...)
	}
	name := func(out []byte, s string) []byte { return append(appendU32(out, uint32(len(s))), s...) }
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = section(out, 1, []byte{4, 0x60, 0, 0, 0x60, 1, 0x7f, 1, 0x7f, 0x60, 1, 0x7f, 0, 0x60, 0, 1, 0x7e})
	funcs := appendU32(nil, uint32(4+n))
	funcs = append(funcs, 0, 1, 2, 3)
	for range n {
		funcs = append(funcs, 0)
	}
	out = section(out, 3, funcs)
	out = section(out, 5, []byte{1, 0, 1})
	exports := []byte{5}
	for i, n := range []string{"memory", "compact_plugin_abi_v1", "compact_v1_alloc", "compact_v1_free", "compact_v1_info"} {
		kind, index := byte(0), byte(i-1)
		if i == 0 {
			kind, index = 2, 0
		}
		exports = append(name(exports, n), kind, index)
	}
	out = section(out, 7, exports)
	deep := []byte{0}
	for range depth {
		deep = append(deep, 0x02, 0x40)
	}
	for range depth + 1 {
		deep = append(deep, 0x0b)
	}
	code := appendU32(nil, uint32(4+n))
	code = append(code, 2, 0, 0x0b, 4, 0, 0x41, 0, 0x0b, 2, 0, 0x0b, 4, 0, 0x42, 0, 0x0b)
	for range n {
		code = append(appendU32(code, uint32(len(deep))), deep...)
	}
	return section(out, 10, code)
}
