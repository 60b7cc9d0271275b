package pluginapi

import (
	"context"
	"time"
)

// ContextErr returns why ctx ended, or nil while it has not: ctx.Err(),
// or context.DeadlineExceeded once the deadline has passed even though
// ctx's own timer has not fired yet. A transport that reads the deadline
// itself (gRPC does, on both ends) can fail a call a moment before ctx
// says it is done; that failure is still the caller's deadline, not a
// crash or a model error.
func ContextErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
