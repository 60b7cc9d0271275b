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
