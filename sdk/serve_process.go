//go:build !wasip1

package sdk

import (
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/compact-host/compact-host/sdk/grpcwire"
)

// Serve publishes p. Outside wasip1 it serves p as a hashicorp/go-plugin
// gRPC process and never returns; run it from main. Started by hand rather
// than by a host, the binary prints go-plugin's notice and exits.
//
// The plugin's log (Host.Log, and anything written to stderr) reaches the
// host's log; stdout belongs to the go-plugin handshake.
func Serve(p *Plugin) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: grpcwire.Handshake,
		Plugins: plugin.PluginSet{grpcwire.PluginName: &grpcwire.GRPCPlugin{
			Handler: func(ctx context.Context, host *grpcwire.HostConn, export string, frame []byte) []byte {
				return p.Handle(ctx, processHost(ctx, host), export, frame)
			},
		}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpcwire.ServerOptions()...)...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{Name: p.Name, Level: hclog.Trace, JSONFormat: true}),
	})
}

func processHost(ctx context.Context, conn *grpcwire.HostConn) *FrameHost {
	return &FrameHost{
		Call: conn.Call,
		LogFunc: func(level slog.Level, msg string) {
			conn.Log(context.WithoutCancel(ctx), int(level), msg)
		},
	}
}
