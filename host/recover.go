package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/compact-host/compact-host/host/overflow"
)

// ErrOverflowPersists is returned by RecoverOverflow when the retry after a
// recovery overflowed again: the agent should stop, not loop.
var ErrOverflowPersists = errors.New("host: the context still overflows after compaction")

// RecoverOverflow handles the error of a model call. If callErr is a
// context overflow (see package overflow for the providers recognised), it
// compacts the session and returns retry true: the agent repeats the call
// once, and that retry does not count against its ordinary retries. A
// window stated in the error (llama.cpp's n_ctx) becomes the engine's
// window. Any other error returns retry false and no error. A second
// overflow before AppendReply returns ErrOverflowPersists.
func (e *Engine) RecoverOverflow(ctx context.Context, s *Session, callErr error) (retry bool, err error) {
	r := overflow.FromError(callErr)
	if !r.Overflow {
		return false, nil
	}
	s.mu.Lock()
	again := s.overflowRetry
	s.overflowRetry = true
	s.forceCompact = true
	overhead := s.lastOverhead
	s.mu.Unlock()
	if again {
		return false, fmt.Errorf("%w: %s", ErrOverflowPersists, r.Reason)
	}
	adopted := 0
	if r.ContextWindow > 0 && r.ContextWindow < int(e.window.Load()) {
		adopted = r.ContextWindow
		e.adoptWindow(r.ContextWindow)
	}
	e.events.emit(&OverflowEvent{Session: s.ID(), Provider: r.Provider, Reason: r.Reason, AdoptedWindow: adopted})
	e.log.Warn("context overflow; compacting before one retry", "session", s.ID(), "provider", r.Provider, "reason", r.Reason, "adopted_window", adopted)

	s.mu.Lock()
	used := e.calibrated(s.contextTokens() + overhead)
	s.mu.Unlock()
	d, err := e.act(ctx, s, overhead, used, Request{ToolSchemaTokens: overhead})
	if err != nil {
		return false, err
	}
	if d.Action == ActionNone {
		return false, fmt.Errorf("%w: nothing could be folded", ErrOverflowPersists)
	}
	return true, nil
}

// adoptWindow makes window the engine's context window, keeping the output
// reserve where it fits.
func (e *Engine) adoptWindow(window int) {
	out := min(e.cfg.MaxOutputTokens, window/4)
	e.window.Store(int64(window))
	e.budget.Store(int64(window - out))
}
