package pluginapi

import (
	"context"
	"errors"
	"log/slog"

	"github.com/compact-host/compact-host/abi"
)

// Services is the host's side of one plugin call. host.Services and
// plugin.Services are aliases of it: one type, so the engine (which must
// not import the plugin runtimes) and the runtimes agree on the method
// signatures of Strategy and Truncator.
type Services interface {
	// Complete returns an *abi.Error with code abi.CodeNoModel when no
	// model is configured.
	Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error)
	CountTokens(ctx context.Context, text string) (int, error)
}

// Offline is the Services of a host with no model: Complete answers
// abi.CodeNoModel and CountTokens estimates four bytes a token.
type Offline struct{}

// Complete implements Services.
func (Offline) Complete(context.Context, *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	return nil, abi.Errorf(abi.CodeNoModel, "no model is configured")
}

// CountTokens implements Services.
func (Offline) CountTokens(_ context.Context, text string) (int, error) {
	return (len(text) + 3) / 4, nil
}

// ServeHostCall answers one host operation of a plugin: it decodes the
// request frame, calls svc and encodes the answer or an error frame. A nil
// svc behaves as Offline.
func ServeHostCall(ctx context.Context, svc Services, op uint32, frame []byte) []byte {
	if svc == nil {
		svc = Offline{}
	}
	var out any
	var err error
	switch op {
	case abi.OpComplete:
		var req abi.CompleteRequest
		if err = abi.Decode(frame, &req); err == nil {
			out, err = svc.Complete(ctx, &req)
		}
	case abi.OpCountTokens:
		var req abi.CountTokensRequest
		if err = abi.Decode(frame, &req); err == nil {
			var n int
			n, err = svc.CountTokens(ctx, req.Text)
			out = &abi.CountTokensResponse{Tokens: n}
		}
	default:
		err = abi.Errorf(abi.CodeUnsupported, "unknown host operation %d", op)
	}
	if err != nil {
		return abi.MustEncodeError(hostError(ctx, err))
	}
	b, err := abi.Encode(out)
	if err != nil {
		return abi.MustEncodeError(abi.Errorf(abi.CodeInternal, "%v", err))
	}
	return b
}

func hostError(ctx context.Context, err error) *abi.Error {
	switch {
	case errors.Is(err, abi.ErrMalformed):
		return abi.Errorf(abi.CodeInvalidRequest, "%v", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return abi.Errorf(abi.CodeDeadline, "%v", err)
	case ContextErr(ctx) != nil:
		// The call's deadline passed while the service worked: whatever
		// the service made of it (a provider's transport error that does
		// not wrap the context's), the plugin must see a deadline, not a
		// model failure it might retry.
		return abi.Errorf(abi.CodeDeadline, "%v: %v", ContextErr(ctx), err)
	}
	var e *abi.Error
	if errors.As(err, &e) {
		return e
	}
	// The cause may name the provider's endpoint but never a credential:
	// providers' errors are built from responses, not from requests.
	return abi.Errorf(abi.CodeModel, "%v", err)
}

// LogLevel clamps a level a plugin sent to slog's four levels.
func LogLevel(level int) slog.Level {
	switch {
	case level < int(slog.LevelInfo):
		return slog.LevelDebug
	case level < int(slog.LevelWarn):
		return slog.LevelInfo
	case level < int(slog.LevelError):
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}
