package proxy

import (
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/internal/tenant"
)

// guard wraps cl, the model client of this request's summary calls, so
// that every call's outcome reaches the tenant's breaker and, after one
// failed call, the request's later calls fail at once.
func (x *exchange) guard(cl host.ModelClient) *tenant.GuardedModel {
	return tenant.Guard(cl, x.p.breakers, x.cred.tenant, func(cooldown time.Duration, err error) {
		x.p.m.breakerOpened.Inc()
		x.log.Warn("summary calls failed repeatedly; this tenant's model-backed summaries are skipped for the cool-down",
			"tenant", string(x.cred.tenant), "cooldown", cooldown, "err", err)
	})
}
