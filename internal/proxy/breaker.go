package proxy

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
)

// errSummaryFailed stops further summary calls of a request after one has
// failed: its fallbacks would only wait for the same upstream again.
var errSummaryFailed = errors.New("an earlier summary call of this request failed; not asking again")

// guardedModel is the model client of one request: it reports every
// call's outcome to the tenant's breaker and, after one failed call,
// fails the request's later calls at once, so the strategies fall back to
// what needs no model.
type guardedModel struct {
	host.ModelClient
	x *exchange

	mu     sync.Mutex
	failed bool
}

func (g *guardedModel) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	g.mu.Lock()
	failed := g.failed
	g.mu.Unlock()
	if failed {
		return nil, errSummaryFailed
	}
	resp, err := g.ModelClient.Complete(ctx, req)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return resp, err // the client went away; the upstream is not to blame
	}
	p := g.x.p
	if p.breakers.Record(g.x.cred.tenant, err, time.Now()) {
		p.m.breakerOpened.Inc()
		g.x.log.Warn("summary calls failed repeatedly; this tenant's model-backed summaries are skipped for the cool-down",
			"tenant", string(g.x.cred.tenant), "cooldown", p.breakers.Cooldown(), "err", err)
	}
	if err != nil {
		g.mu.Lock()
		g.failed = true
		g.mu.Unlock()
	}
	return resp, err
}
