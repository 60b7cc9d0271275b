// Command infohang is a hostile process plugin: it completes the
// go-plugin handshake, then never answers any call, Info included.
package main

import (
	"context"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/compact-host/compact-host/sdk/grpcwire"
)

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: grpcwire.Handshake,
		Plugins: plugin.PluginSet{grpcwire.PluginName: &grpcwire.GRPCPlugin{
			Handler: func(context.Context, *grpcwire.HostConn, string, []byte) []byte {
				time.Sleep(time.Hour)
				return nil
			},
		}},
		GRPCServer: plugin.DefaultGRPCServer,
	})
}
