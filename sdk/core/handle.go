package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/compact-host/compact-host/abi"
)

// Handle runs one ABI call against p: it decodes the request frame, calls
// the plugin, and encodes its answer or an error frame. export is the wasm
// export name of the call (abi.ExportInfo, abi.ExportSummarize or
// abi.ExportTruncate); both transports use these names so there is one
// vocabulary. Handle never panics: a panic in plugin code becomes an
// internal error frame, so one bad request cannot take the plugin down.
//
// Serve calls Handle; it is exported for transports and tests that drive
// a plugin without a host.
func (p *Plugin) Handle(ctx context.Context, host Host, export string, frame []byte) (out []byte) {
	defer func() {
		if r := recover(); r != nil {
			out = abi.MustEncodeError(abi.Errorf(abi.CodeInternal, "plugin %s panicked: %v", p.Name, r))
		}
	}()
	switch export {
	case abi.ExportInfo:
		info := p.Info()
		return encodeOrError(&info)
	case abi.ExportSummarize:
		if p.Strategy == nil {
			return abi.MustEncodeError(abi.Errorf(abi.CodeUnsupported, "plugin %s is not a strategy", p.Name))
		}
		var req abi.SummarizeRequest
		if err := abi.Decode(frame, &req); err != nil {
			return abi.MustEncodeError(requestError(err))
		}
		resp, err := p.Strategy.Summarize(ctx, host, &req)
		if err != nil {
			return abi.MustEncodeError(abi.AsError(err))
		}
		if resp == nil {
			return abi.MustEncodeError(abi.Errorf(abi.CodeInternal, "plugin %s returned no summary and no error", p.Name))
		}
		return encodeOrError(resp)
	case abi.ExportTruncate:
		if p.Truncator == nil {
			return abi.MustEncodeError(abi.Errorf(abi.CodeUnsupported, "plugin %s is not a truncator", p.Name))
		}
		var req abi.TruncateRequest
		if err := abi.Decode(frame, &req); err != nil {
			return abi.MustEncodeError(requestError(err))
		}
		// The declared categories are the contract; refusing the others
		// here means no truncator has to remember to.
		if len(p.Categories) > 0 && !slices.Contains(p.Categories, req.Category) {
			return abi.MustEncodeError(abi.Errorf(abi.CodeUnsupported, "plugin %s does not truncate category %q", p.Name, req.Category))
		}
		resp, err := p.Truncator.Truncate(ctx, host, &req)
		if err != nil {
			return abi.MustEncodeError(abi.AsError(err))
		}
		if resp == nil {
			return abi.MustEncodeError(abi.Errorf(abi.CodeInternal, "plugin %s returned no output and no error", p.Name))
		}
		return encodeOrError(resp)
	default:
		return abi.MustEncodeError(abi.Errorf(abi.CodeUnsupported, "unknown call %q", export))
	}
}

// requestError turns a request that failed to decode into an
// invalid_request error, whatever the codec said.
func requestError(err error) *abi.Error {
	var e *abi.Error
	if errors.As(err, &e) {
		return abi.Errorf(abi.CodeInvalidRequest, "request is an error frame: %s", e.Message)
	}
	return abi.Errorf(abi.CodeInvalidRequest, "%v", err)
}

func encodeOrError(doc any) []byte {
	b, err := abi.Encode(doc)
	if err != nil {
		return abi.MustEncodeError(abi.Errorf(abi.CodeInternal, "%v", err))
	}
	return b
}

// HostCallFunc sends one host operation (abi.OpComplete, abi.OpCountTokens)
// as a request frame and returns the host's response frame.
type HostCallFunc func(ctx context.Context, op uint32, frame []byte) ([]byte, error)

// FrameHost is a Host that speaks to the host through frames: the form
// both transports carry. Call and Log are the transport's primitives.
type FrameHost struct {
	Call HostCallFunc
	// LogFunc writes one log line into the host's log.
	LogFunc func(level slog.Level, msg string)
}

// Complete implements Host.
func (h *FrameHost) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	var resp abi.CompleteResponse
	if err := h.roundTrip(ctx, abi.OpComplete, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// CountTokens implements Host.
func (h *FrameHost) CountTokens(ctx context.Context, text string) (int, error) {
	var resp abi.CountTokensResponse
	if err := h.roundTrip(ctx, abi.OpCountTokens, &abi.CountTokensRequest{Text: text}, &resp); err != nil {
		return 0, err
	}
	return resp.Tokens, nil
}

// Log implements Host.
func (h *FrameHost) Log(level slog.Level, msg string) {
	if h.LogFunc != nil {
		h.LogFunc(level, msg)
	}
}

func (h *FrameHost) roundTrip(ctx context.Context, op uint32, req, resp any) error {
	frame, err := abi.Encode(req)
	if err != nil {
		return fmt.Errorf("sdk: host call %d: %w", op, err)
	}
	out, err := h.Call(ctx, op, frame)
	if err != nil {
		return fmt.Errorf("sdk: host call %d: %w", op, err)
	}
	// An error frame decodes to its *abi.Error, returned as is so a
	// strategy can test for abi.CodeNoModel.
	return abi.Decode(out, resp)
}

var _ Host = (*FrameHost)(nil)
