// Package sdk is what a compact-host plugin imports. A plugin is a Go value
// implementing Strategy, Truncator or both, handed to Serve from main:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared  → a wasm plugin
//	go build                                              → a process plugin
//
// The host can also link the same value in-process; a host or a library of
// plugins imports package sdk/core, the same types without the process
// transport. The SDK hides memory handling and the frame encoding of
// package abi.
//
// A complete strategy: it asks the host's model when there is one, and
// lists the user's requests when there is not.
//
//	package main
//
//	import (
//		"context"
//		"strings"
//
//		"github.com/compact-host/compact-host/abi"
//		"github.com/compact-host/compact-host/sdk"
//	)
//
//	type requests struct{}
//
//	func (requests) Summarize(ctx context.Context, host sdk.Host, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
//		if req.ModelAvailable {
//			resp, err := host.Complete(ctx, &abi.CompleteRequest{System: "Summarize this conversation; keep paths verbatim.", Messages: req.Messages})
//			if err == nil {
//				return &abi.SummarizeResponse{Summary: resp.Text}, nil
//			}
//		}
//		var b strings.Builder
//		for _, m := range req.Messages {
//			for _, blk := range m.Content {
//				if m.Role == abi.RoleUser && blk.Type == abi.BlockText {
//					b.WriteString("- " + blk.Text + "\n")
//				}
//			}
//		}
//		return &abi.SummarizeResponse{Summary: "The user asked:\n" + b.String(), Offline: true}, nil
//	}
//
//	func main() { sdk.Serve(&sdk.Plugin{Name: "requests", Version: "1.0.0", Strategy: requests{}}) }
//
// Drop the built file into the host's plugins directory and select it with
// --strategy=requests; `compact-host plugins verify` checks it.
package sdk

import (
	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/sdk/core"
)

// The plugin types live in package sdk/core, which a host or a library of
// plugins imports without linking the process transport (go-plugin, gRPC)
// that Serve needs; these names are the same types.
type (
	// Host is the host's side of a call: the services a plugin may use.
	Host = core.Host
	// Strategy summarizes messages that are being folded out of the context.
	Strategy = core.Strategy
	// Truncator shortens one tool output to fit a token cap.
	Truncator = core.Truncator
	// Plugin is what Serve publishes.
	Plugin = core.Plugin
	// FrameHost is a Host that speaks to the host through frames.
	FrameHost = core.FrameHost
	// HostCallFunc sends one host operation as a frame.
	HostCallFunc = core.HostCallFunc
)

// AppendMarkers returns summary with a line for each marker it does not
// carry yet. A strategy passes req.Markers (ABI 1.1): a marker placed in
// the text where its content is summarized reads best, and this adds the
// rest, so that the model can recall every folded original. The host adds
// any marker a summary still lacks, so a strategy that ignores markers
// loses none.
func AppendMarkers(summary string, markers []abi.Marker) string {
	return abi.AppendMarkers(summary, markers)
}
