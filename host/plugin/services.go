package plugin

import (
	"context"

	"github.com/compact-host/compact-host/abi"
)

// Services is what the host offers a plugin during one call: a model
// completion and token counting. The engine passes its own Services with
// every call, so a plugin loaded once serves engines with different models.
// Implementations must be safe for concurrent use.
type Services interface {
	// Complete returns an *abi.Error with code abi.CodeNoModel when no
	// model is configured.
	Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error)
	CountTokens(ctx context.Context, text string) (int, error)
}
