// Package core is the SDK without its transports: the types a plugin
// implements (Plugin, Strategy, Truncator, Host) and the frame handling
// both transports share (Plugin.Handle, FrameHost). Package sdk is these
// types plus Serve, which for a process plugin links hashicorp/go-plugin
// and gRPC; code that only links plugins into a host, such as a library
// of strategies, imports core and links neither.
package core

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
