package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/internal/tenant"
)

// errBreakerOpen fails a tenant's summary calls while its breaker is
// open: the strategies fall back to what needs no model at once, instead
// of each request waiting on an upstream that keeps failing.
var errBreakerOpen = errors.New("summary calls failed repeatedly; skipped during the cool-down")

// errSummaryFailed stops further summary calls of a request after one has
// failed: its fallbacks would only wait for the same upstream again.
var errSummaryFailed = errors.New("an earlier summary call of this request failed; not asking again")

// guardedModel is the model client of one request: it reports each call's
// outcome to its tenant's breaker, calls nothing while that is open, and
// after one failed call fails the request's later calls at once.
type guardedModel struct {
	next   host.ModelClient
	s      *Server
	tenant tenant.ID

	mu     sync.Mutex
	failed bool
}

func (g *guardedModel) Model() string { return g.next.Model() }

func (g *guardedModel) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	g.mu.Lock()
	failed := g.failed
	g.mu.Unlock()
	if failed {
		return nil, errSummaryFailed
	}
	b := g.s.breakers
	if b.Open(g.tenant, time.Now()) {
		return nil, fmt.Errorf("%w (%s)", errBreakerOpen, b.Cooldown())
	}
	resp, err := g.next.Complete(ctx, req)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return resp, err // the client went away; the upstream is not to blame
	}
	if b.Record(g.tenant, err, time.Now()) {
		g.s.log.Warn("summary calls failed repeatedly; this tenant's model-backed summaries are skipped for the cool-down",
			"tenant", g.tenant, "cooldown", b.Cooldown(), "err", err)
	}
	if err != nil {
		g.mu.Lock()
		g.failed = true
		g.mu.Unlock()
	}
	return resp, err
}

var _ host.ModelClient = (*guardedModel)(nil)
