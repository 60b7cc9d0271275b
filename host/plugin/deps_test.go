package plugin_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/internal/deplist"
)

// The runtimes are wired in through Options, so an agent that links the
// built-ins in process, or its own plugins, builds fast and small: neither
// the core of this package, nor package inprocess, nor the SDK's plugin
// types may reach wazero, go-plugin, gRPC, protobuf or the embedded
// modules through an import.
func TestCoreDependencies(t *testing.T) {
	const module = "github.com/compact-host/compact-host/"
	forbidden := []string{
		"github.com/tetratelabs/wazero",
		"github.com/hashicorp/go-plugin",
		"google.golang.org/grpc",
		"google.golang.org/protobuf",
		module + "host/internal/wasmrt",
		module + "host/internal/procrt",
		module + "host/internal/builtin",
		module + "host/plugin/wasm",
		module + "host/plugin/process",
		module + "sdk/grpcwire",
	}
	for _, pkg := range []string{module + "host/plugin", module + "host/plugin/inprocess", module + "sdk/core"} {
		deps, err := deplist.NonStandard(pkg)
		require.NoError(t, err)
		require.Contains(t, deps, pkg, "go list printed no %s: %q", pkg, deps)
		for _, d := range deps {
			assert.False(t, d == module+"sdk", "%s depends on package sdk, whose Serve links gRPC; import sdk/core", pkg)
			for _, f := range forbidden {
				assert.False(t, deplist.Under(d, f), "%s depends on %s", pkg, d)
			}
		}
	}
}
