// Package process runs compact-host process plugins: executables that
// serve the plugin ABI over hashicorp/go-plugin and gRPC, started from a
// *.plugin.json manifest. Package plugin links neither; wire the runtime
// in through its Options:
//
//	reg, err := plugin.NewRegistry(ctx, plugin.Options{Process: process.Runtime, ...})
//
// A process plugin is trusted code that runs as the user (README.md,
// Trust model); every call still has a deadline, and a crashed process is
// started again at the next call.
package process

import (
	"context"

	"github.com/compact-host/compact-host/host/internal/pluginapi"
	"github.com/compact-host/compact-host/host/internal/procrt"
)

// Runtime is the process runtime: set plugin.Options.Process to it.
func Runtime(ctx context.Context, cfg pluginapi.ProcessConfig) (pluginapi.Conn, error) {
	p, err := procrt.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}
