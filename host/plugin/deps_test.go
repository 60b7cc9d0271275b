package plugin_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The runtimes are wired in through Options, so an agent that links the
// built-ins in process, or its own plugins, builds fast and small: neither
// the core of this package, nor package inprocess, nor the SDK's plugin
// types may reach wazero, go-plugin, gRPC, protobuf or the embedded
// modules through an import.
func TestCoreDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to list the packages' dependencies")
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
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := exec.CommandContext(ctx, goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
		cancel()
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		require.NoError(t, err, "go list -deps %s: %s", pkg, stderr)
		deps := strings.Fields(string(out))
		require.Contains(t, deps, pkg, "go list printed no %s: %q", pkg, out)
		for _, d := range deps {
			assert.False(t, d == module+"sdk", "%s depends on package sdk, whose Serve links gRPC; import sdk/core", pkg)
			for _, f := range forbidden {
				assert.False(t, d == f || strings.HasPrefix(d, f+"/"), "%s depends on %s", pkg, d)
			}
		}
	}
}
