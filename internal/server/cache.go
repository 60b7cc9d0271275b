package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/internal/cachestate"
)

// A session's cache state and cost report are kept with its options in
// the store (sessionSettings.Cache), so that they survive a compaction
// and a restart, and every replica that shares the store sees them. Each
// assistant message appended with a usage report is one model call of
// the client's, made just before the append: its time is the append's.

// SessionCache is a session's prompt cache as the usage its client
// reports shows it, and what its model calls cost.
type SessionCache struct {
	// LastRequest is when the latest usage report was appended; absent
	// before the first.
	LastRequest *time.Time `json:"last_request,omitempty"`
	// TTL is the cache lifetime in force, "5m" or "1h" (the session's
	// cache_ttl).
	TTL string `json:"cache_ttl"`
	// Cold says the cache has expired now: the last request is older
	// than the TTL.
	Cold bool `json:"cold"`
	// CachedTokens is what the last reported call left in the cache (its
	// reads and writes; for a provider that caches by itself, its whole
	// prompt); PromptTokens is its whole prompt.
	CachedTokens int `json:"cached_tokens"`
	PromptTokens int `json:"prompt_tokens"`
	// Requests counts the usage reports.
	Requests int `json:"requests"`
	// Misses counts the requests that found nothing cached, by reason:
	// cold_start, ttl_expired, compaction, prefix_changed.
	Misses map[string]int `json:"misses"`
	// Growth is the pauses between requests, those longer than the TTL,
	// and what the prompt grew across them: what the cache-aware policy
	// chooses its fold by.
	Growth cost.Growth `json:"growth"`
	Cost   SessionCost `json:"cost"`
}

// SessionCost is what a session's model calls were billed beside what
// they would have been without its compactions.
type SessionCost struct {
	// Priced says the catalog prices the session's model; without, every
	// USD figure is 0 and the token counts stand.
	Priced bool `json:"priced"`
	// Bill is the reported usage by kind of token, priced.
	Bill cost.Bill `json:"bill"`
	// UncompactedUSD is the same calls without the compactions (see
	// cachestate.Report).
	UncompactedUSD float64 `json:"uncompacted_usd"`
	// SummaryUSD is the compactions' summary calls; CompactionsUSD those
	// and the rewrites the compactions caused.
	SummaryUSD     float64 `json:"summary_usd"`
	CompactionsUSD float64 `json:"compactions_usd"`
	// SavedUSD is UncompactedUSD less the bill and the summary calls:
	// what compacting saved so far (negative: what it cost).
	SavedUSD float64 `json:"saved_usd"`
	// Compactions are the latest compactions priced, oldest first.
	Compactions []cachestate.CompactionCost `json:"compactions"`
}

// newSessionCache is the state of a session that has reported no usage.
func newSessionCache(e *host.Engine) *cachestate.Conversation {
	return &cachestate.Conversation{Report: cachestate.NewReport(e.Budget().CacheTTL)}
}

// prices are the catalog's prices of model, and whether it has them.
func prices(model string) (cost.Prices, bool) {
	if m, ok := catalog.Lookup(model); ok && model != "" && m.Prices().Known() {
		return m.Prices(), true
	}
	return cost.Prices{}, false
}

// selfCaching says the provider of model caches every prompt by itself
// (all but Anthropic's, which caches what cache_control marks).
func selfCaching(model string) bool {
	m, ok := catalog.Lookup(model)
	return ok && model != "" && m.Provider != "anthropic"
}

// observeUsage records the usage reports of msgs, appended at now, in
// state; it returns the miss reasons, one per request that missed.
func observeUsage(state *cachestate.Conversation, e *host.Engine, model string, msgs []abi.Message, now time.Time) (reports int, misses []string) {
	p, _ := prices(model)
	for _, m := range msgs {
		if m.Role != abi.RoleAssistant || m.Usage == nil || !plausible(*m.Usage) {
			continue
		}
		reports++
		u := cost.FromUsage(*m.Usage)
		t := state.Begin(now, e.Budget().CacheTTL)
		if reason := state.Finish(t, model, p, &u, selfCaching(model), false); reason != "" {
			misses = append(misses, reason)
		}
	}
	return reports, misses
}

// plausible says a usage report counts tokens one call can have: none
// negative, none past the largest window.
func plausible(u abi.Usage) bool {
	for _, n := range []int{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens} {
		if n < 0 || n > host.MaxContextWindow {
			return false
		}
	}
	return true
}

// cacheView is the API's view of a session's state at now.
func cacheView(state *cachestate.Conversation, e *host.Engine, model string, now time.Time) *SessionCache {
	if state == nil {
		state = newSessionCache(e)
	}
	_, priced := prices(model)
	v := &SessionCache{TTL: cachestate.TTLName(e.Budget().CacheTTL), Cold: state.Cold(now), CachedTokens: state.CachedTokens,
		PromptTokens: state.PromptTokens, Requests: state.Requests, Misses: map[string]int{}, Growth: state.Growth,
		Cost: SessionCost{Priced: priced, Bill: state.Bill, UncompactedUSD: state.Bill.USD, Compactions: []cachestate.CompactionCost{}}}
	if !state.LastRequest.IsZero() {
		at := state.LastRequest
		v.LastRequest = &at
	}
	for k, n := range state.Misses {
		v.Misses[k] = n
	}
	if r := state.Report; r != nil {
		v.Cost.UncompactedUSD, v.Cost.SummaryUSD, v.Cost.CompactionsUSD = r.UncompactedUSD, r.SummaryUSD, r.CompactionsUSD
		v.Cost.Compactions = append(v.Cost.Compactions, r.Compactions...)
	}
	v.Cost.SavedUSD = v.Cost.UncompactedUSD - v.Cost.Bill.USD - v.Cost.SummaryUSD
	return v
}

// metricsRegistry is serve's Prometheus registry: the cache misses of
// its sessions, by reason.
func newMetrics() (*prometheus.Registry, *prometheus.CounterVec) {
	reg := prometheus.NewRegistry()
	return reg, cachestate.NewMisses(reg)
}

// metrics serves GET /metrics.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request, _ []byte) *apiError {
	promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}

// countMisses adds a written request's misses to the metric.
func (s *Server) countMisses(reasons []string) {
	for _, r := range reasons {
		s.misses.WithLabelValues(r).Inc()
	}
}
