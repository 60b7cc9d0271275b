// Package sdk is what a compact-host plugin imports. A plugin is a Go value
// implementing Strategy, Truncator or both, handed to Serve from main:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared  → a wasm plugin
//	go build                                              → a process plugin
//
// The host can also link the same value in-process. The SDK hides memory
// handling and the frame encoding of package abi.
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
	"context"
	"log/slog"

	"github.com/compact-host/compact-host/abi"
)

// Host is the host's side of a call: the services a plugin may use. It is
// valid only for the duration of the call it was passed to.
type Host interface {
	// Complete asks the host's configured model for a completion. It
	// returns an *abi.Error with code abi.CodeNoModel when the host has no
	// model; a strategy then runs its offline mode. API keys never reach
	// the plugin.
	Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error)
	// CountTokens counts text with the host's tokenizer for its model.
	CountTokens(ctx context.Context, text string) (int, error)
	// Log writes into the host's log.
	Log(level slog.Level, msg string)
}

// Strategy summarizes messages that are being folded out of the context.
type Strategy interface {
	Summarize(ctx context.Context, host Host, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error)
}

// Truncator shortens one tool output to fit a token cap.
type Truncator interface {
	Truncate(ctx context.Context, host Host, req *abi.TruncateRequest) (*abi.TruncateResponse, error)
}

// Plugin is what Serve publishes. At least one of Strategy and Truncator is set.
type Plugin struct {
	Name        string
	Version     string
	Description string
	Strategy    Strategy
	Truncator   Truncator
	// Categories are the tool-output categories Truncator handles.
	Categories []string
}

// Info describes p in the form the host asks for.
func (p *Plugin) Info() abi.Info {
	info := abi.Info{
		ABIMajor: abi.Major, ABIMinor: abi.Minor,
		Name: p.Name, Version: p.Version, Description: p.Description,
		Categories: p.Categories,
	}
	if p.Strategy != nil {
		info.Kinds = append(info.Kinds, abi.KindStrategy)
	}
	if p.Truncator != nil {
		info.Kinds = append(info.Kinds, abi.KindTruncator)
	}
	return info
}
