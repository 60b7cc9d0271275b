package tenant

import (
	"sync"
	"time"
)

// MaxBreakerTenants bounds the tenants whose failures Breakers remember:
// tenants come from credentials, which clients choose.
const MaxBreakerTenants = 10_000

// Breakers count each tenant's consecutive failures of one kind (failed
// summary calls) across everything the tenant does: an engine that lives
// for one request never sees a second failure with its own breaker. Only
// tenants with failures are kept. Breakers are safe for concurrent use.
type Breakers struct {
	threshold int
	cooldown  time.Duration

	mu    sync.Mutex
	state map[ID]*breakerState
}

type breakerState struct {
	failures  int
	openUntil time.Time
}

// NewBreakers opens a tenant's breaker for cooldown after threshold
// failures in a row (at least 1).
func NewBreakers(threshold int, cooldown time.Duration) *Breakers {
	return &Breakers{threshold: max(threshold, 1), cooldown: cooldown, state: map[ID]*breakerState{}}
}

// Cooldown is how long an opened breaker stays open.
func (b *Breakers) Cooldown() time.Duration { return b.cooldown }

// Open reports whether t's breaker is open at now. Once the cool-down is
// over, calls go out again; the next failure reopens it.
func (b *Breakers) Open(t ID, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.state[t]
	return s != nil && now.Before(s.openUntil)
}

// Record counts an outcome for t (err nil: a success, which closes the
// breaker), and reports whether this failure opened it.
func (b *Breakers) Record(t ID, err error, now time.Time) (opened bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		delete(b.state, t)
		return false
	}
	s := b.state[t]
	if s == nil {
		if len(b.state) >= MaxBreakerTenants {
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
