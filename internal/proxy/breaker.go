package proxy

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/internal/tenant"
)

// maxBreakerTenants bounds the tenants whose failures are remembered:
// tenants come from credentials, which clients choose.
const maxBreakerTenants = 10000

// breakers count each tenant's consecutive failed summary calls, across
// its conversations: an engine lives for one request, so its own breaker
// never sees a second failure. Only tenants with failures are kept.
type breakers struct {
	threshold int
	cooldown  time.Duration

	mu    sync.Mutex
	state map[tenant.ID]*breakerState
}

type breakerState struct {
	failures  int
	openUntil time.Time
}

func newBreakers(threshold int, cooldown time.Duration) *breakers {
	return &breakers{threshold: threshold, cooldown: cooldown, state: map[tenant.ID]*breakerState{}}
}

// open reports whether t's summary calls are skipped now. Once the
// cool-down is over, calls go out again; the first failure reopens it.
func (b *breakers) open(t tenant.ID, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.state[t]
	return s != nil && now.Before(s.openUntil)
}

// record counts a summary call's outcome for t, and reports whether this
// failure opened t's breaker.
func (b *breakers) record(t tenant.ID, err error, now time.Time) (opened bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		delete(b.state, t)
		return false
	}
	s := b.state[t]
	if s == nil {
		if len(b.state) >= maxBreakerTenants {
			for k := range b.state { // any one: the map is bounded, not ordered
				delete(b.state, k)
				break
			}
		}
		s = &breakerState{}
		b.state[t] = s
	}
	s.failures++
	if s.failures >= b.threshold && !now.Before(s.openUntil) {
		s.openUntil = now.Add(b.cooldown)
		return true
	}
	return false
}

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
	if p.breakers.record(g.x.cred.tenant, err, time.Now()) {
		p.m.breakerOpened.Inc()
		g.x.log.Warn("summary calls failed repeatedly; this tenant's model-backed summaries are skipped for the cool-down",
			"tenant", string(g.x.cred.tenant), "cooldown", p.breakers.cooldown, "err", err)
	}
	if err != nil {
		g.mu.Lock()
		g.failed = true
		g.mu.Unlock()
	}
	return resp, err
}
