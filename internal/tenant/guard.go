package tenant

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
)

// ErrBreakerOpen fails a tenant's summary calls while its breaker is open:
// the strategies fall back to what needs no model at once, instead of each
// request waiting on an upstream that keeps failing.
var ErrBreakerOpen = errors.New("summary calls failed repeatedly; skipped during the cool-down")

// ErrSummaryFailed stops further summary calls of a request after one has
// failed: its fallbacks would only wait for the same upstream again.
var ErrSummaryFailed = errors.New("an earlier summary call of this request failed; not asking again")

// GuardedModel is the model client of one request of one tenant: it
// reports each call's outcome to the tenant's breaker, calls nothing while
// that is open, and after one failed call fails the request's later calls
// at once, so the strategies fall back to what needs no model. The proxy
// and serve each make one per request.
type GuardedModel struct {
	next     host.ModelClient
	breakers *Breakers
	tenant   ID
	opened   func(cooldown time.Duration, err error)

	mu     sync.Mutex
	failed bool
}

// Guard wraps next for a request of tenant t. opened, if not nil, is
// called when a failure of this request opens the tenant's breaker.
func Guard(next host.ModelClient, b *Breakers, t ID, opened func(cooldown time.Duration, err error)) *GuardedModel {
	return &GuardedModel{next: next, breakers: b, tenant: t, opened: opened}
}

// Model is the wrapped client's model.
func (g *GuardedModel) Model() string { return g.next.Model() }

// Complete asks the wrapped client unless the request or its tenant has
// failed already.
func (g *GuardedModel) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	g.mu.Lock()
	failed := g.failed
	g.mu.Unlock()
	if failed {
		return nil, ErrSummaryFailed
	}
	b := g.breakers
	if b.Open(g.tenant, time.Now()) {
		return nil, fmt.Errorf("%w (%s)", ErrBreakerOpen, b.Cooldown())
	}
	resp, err := g.next.Complete(ctx, req)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return resp, err // the client went away; the upstream is not to blame
	}
	if b.Record(g.tenant, err, time.Now()) && g.opened != nil {
		g.opened(b.Cooldown(), err)
	}
	if err != nil {
		g.mu.Lock()
		g.failed = true
		g.mu.Unlock()
	}
	return resp, err
}

var _ host.ModelClient = (*GuardedModel)(nil)
