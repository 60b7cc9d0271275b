// Package cachestate is one conversation's provider prompt cache as its
// requests and their reported usage show it: when the last request went
// out, the TTL in force, what the provider cached, why a request found
// nothing cached, and what the requests were billed. With a Report it
// also keeps the conversation's cost report: the bill without its
// compactions and what each compaction cost. The proxy keeps one per
// conversation in memory; serve keeps one with each session in its store.
package cachestate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compact-host/compact-host/host/cost"
)

// Why a request found nothing of its conversation's prompt in the
// provider's cache.
const (
	ColdStart     = "cold_start"     // the conversation's first request
	TTLExpired    = "ttl_expired"    // the last request is older than the cache's TTL
	Compaction    = "compaction"     // a new compaction rewrote the prompt
	PrefixChanged = "prefix_changed" // the reads cover under 90% of what the last answer cached
)

// Reasons are the miss reasons, in the order documented.
var Reasons = []string{ColdStart, TTLExpired, Compaction, PrefixChanged}

// MetricName is the miss counter's name, the same wherever it is served
// so that one query reads the proxy's and serve's.
const MetricName = "compact_host_proxy_cache_misses_total"

// NewMisses returns the miss counter, labelled by reason only (never by
// tenant or conversation, so its series stay four), every reason at 0,
// registered with reg.
func NewMisses(reg prometheus.Registerer) *prometheus.CounterVec {
	m := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricName,
		Help: "Answers whose prompt was not read from the provider's cache, by reason: cold_start (a conversation's first request), ttl_expired (its last request is older than the cache's TTL), compaction (a new compaction rewrote the prompt), prefix_changed (the cache reads cover under 90% of what the last answer cached)."},
		[]string{"reason"})
	for _, r := range Reasons {
		m.WithLabelValues(r)
	}
	reg.MustRegister(m)
	return m
}

// MaxCompactions bounds the compactions a Report lists; its totals count
// every one.
const MaxCompactions = 100

// Conversation is one conversation's cache state and bill. Its methods
// are not safe for concurrent use: the caller holds the conversation.
type Conversation struct {
	Model string `json:"model"`
	// Requests counts the answers whose usage was read.
	Requests    int       `json:"requests"`
	LastRequest time.Time `json:"last_request"`
	// TTL is the lifetime of the cache entries of the last request, "5m"
	// or "1h".
	TTL string `json:"cache_ttl"`
	// CachedTokens is the prompt the last answer left in the cache: its
	// reads and writes (or, for providers that cache by themselves, its
	// whole prompt).
	CachedTokens int `json:"cached_tokens"`
	// PromptTokens is the last request's whole prompt.
	PromptTokens int            `json:"prompt_tokens"`
	Compactions  int            `json:"compactions"`
	Misses       map[string]int `json:"misses"`
	// Bill is what the answers were billed (0 USD for a model without
	// prices).
	Bill cost.Bill `json:"bill"`
	// Growth is the pauses between requests and what the prompt grew
	// across them, for the cache-aware fold (host.Request.Growth).
	Growth cost.Growth `json:"growth"`
	// Report is the cost report, kept by callers that tell the
	// conversation of its compactions (Compacted); nil otherwise.
	Report *Report `json:"cost,omitempty"`
}

// Report is a conversation's cost beside what it would have cost without
// its compactions.
type Report struct {
	// UncompactedUSD is what the same requests would have been billed
	// without the compactions: each request's bill, plus what the cache
	// model (cost.Replay: read while warm, written when expired, first sent
	// or rewritten) bills more for its prompt with what the compactions
	// freed put back, and without their rewrites. Before the first
	// compaction it is the bill.
	UncompactedUSD float64 `json:"uncompacted_usd"`
	// CompactionsUSD is every compaction's own cost: its summary calls
	// and the rewrite of the prompt it causes. SummaryUSD is the summary
	// calls alone, which the requests' bill does not hold (the rewrites
	// are in it).
	CompactionsUSD float64 `json:"compactions_usd"`
	SummaryUSD     float64 `json:"summary_usd"`
	// FreedTokens is what the compactions took out of the prompt.
	FreedTokens int `json:"freed_tokens"`
	// Compactions are the latest MaxCompactions compactions, oldest first.
	Compactions []CompactionCost `json:"compactions"`
	// Pending says a compaction rewrote the prompt since the last
	// request: the next one misses for it.
	Pending bool `json:"pending,omitempty"`
	// Replay and Sent are the cache model of the requests without their
	// compactions and as they were sent.
	Replay cost.Replayer `json:"replay"`
	Sent   cost.Replayer `json:"sent"`
}

// NewReport is an empty report whose cache entries live ttl.
func NewReport(ttl time.Duration) *Report {
	return &Report{Replay: cost.Replayer{TTL: ttl}, Sent: cost.Replayer{TTL: ttl}}
}

// CompactionCost is one compaction priced: what it cost and what it
// saves (cost.PriceCompaction), from the cache's state when it was made.
type CompactionCost struct {
	Time         time.Time `json:"time"`
	TokensBefore int       `json:"tokens_before"`
	TokensAfter  int       `json:"tokens_after"`
	// Warm says the cache of the prompt before was alive.
	Warm bool `json:"warm"`
	cost.Compaction
}

// TTLName names a cache lifetime as cache_control does.
func TTLName(ttl time.Duration) string {
	if ttl >= cost.TTL1h {
		return "1h"
	}
	return "5m"
}

// ttl is the lifetime of the last request's entries.
func (c *Conversation) ttl() time.Duration {
	if c.TTL == "1h" {
		return cost.TTL1h
	}
	return cost.TTL5m
}

// Turn is one request on its way: what the state said when it was sent.
type Turn struct {
	At  time.Time
	TTL time.Duration
	// Known is the miss reason known before the answer, "" when none.
	Known string
	// Cold says the cache expired since the last request.
	Cold bool
	// Growth is the conversation's growth before this request.
	Growth cost.Growth
}

// Begin starts a request sent at at, whose cache entries live ttl: a
// first request is a cold start, one after a pause longer than the last
// request's TTL finds the cache expired.
func (c *Conversation) Begin(at time.Time, ttl time.Duration) Turn {
	t := Turn{At: at, TTL: ttl, Growth: c.Growth}
	switch {
	case c.LastRequest.IsZero():
		t.Known = ColdStart
	case at.Sub(c.LastRequest) > c.ttl():
		t.Known, t.Cold = TTLExpired, true
	}
	return t
}

// Cold says whether the cache has expired at time at: the last request is
// older than its TTL. A conversation that sent nothing is not cold:
// nothing was cached to lose.
func (c *Conversation) Cold(at time.Time) bool {
	return !c.LastRequest.IsZero() && at.Sub(c.LastRequest) > c.ttl()
}

// Finish records the answer to t: its usage u (nil when none was read),
// priced at p, from a provider that caches every prompt by itself
// (selfCaching: OpenAI, Gemini) or only what cache_control marks
// (Anthropic). compacted says a new compaction rewrote this request's
// prompt (a Report's pending compaction counts too). It returns why the
// request missed the cache, "" when it did not.
func (c *Conversation) Finish(t Turn, model string, p cost.Prices, u *cost.Request, selfCaching, compacted bool) string {
	if c.Report != nil && c.Report.Pending {
		compacted, c.Report.Pending = true, false
	}
	prevLast, prevPrompt, seen := c.LastRequest, c.PromptTokens, c.Requests > 0
	c.Model, c.LastRequest, c.TTL = model, t.At, TTLName(t.TTL)
	reason := t.Known
	if reason == "" && compacted {
		reason = Compaction
	}
	if compacted {
		c.Compactions++
	}
	if u != nil {
		if reason == "" && c.CachedTokens > 0 && 10*u.CacheRead < 9*c.CachedTokens {
			reason = PrefixChanged
		}
		if seen && !compacted {
			// A compacted prompt's growth is not known: what it freed
			// hides it.
			c.Growth.Observe(t.At.Sub(prevLast), t.TTL, u.PromptTokens()-prevPrompt)
		}
		c.Requests++
		c.PromptTokens = u.PromptTokens()
		c.CachedTokens = u.CacheRead + u.CacheWrite5m + u.CacheWrite1h
		if selfCaching {
			c.CachedTokens = c.PromptTokens
		}
		c.Bill.Add(p, *u)
		if r := c.Report; r != nil {
			r.Replay.TTL, r.Sent.TTL = t.TTL, t.TTL
			sent := r.Sent.Send(cost.Call{Time: t.At, PromptTokens: c.PromptTokens, OutputTokens: u.Output, Rewritten: compacted})
			uc := r.Replay.Send(cost.Call{Time: t.At, PromptTokens: c.PromptTokens + r.FreedTokens, OutputTokens: u.Output})
			r.UncompactedUSD += u.USD(p) + uc.USD(p) - sent.USD(p)
		}
	}
	if reason != "" {
		if c.Misses == nil {
			c.Misses = map[string]int{}
		}
		c.Misses[reason]++
	}
	return reason
}

// Compacted records a compaction made at at that took the prompt from
// before to after tokens with summary calls that cost summaryUSD, priced
// at p with cache entries that live ttl; the next request misses for it.
// It starts the Report if there was none.
func (c *Conversation) Compacted(at time.Time, ttl time.Duration, p cost.Prices, before, after int, summaryUSD float64) CompactionCost {
	if c.Report == nil {
		c.Report = NewReport(ttl)
	}
	r := c.Report
	warm := !c.LastRequest.IsZero() && !c.Cold(at)
	cc := CompactionCost{Time: at, TokensBefore: before, TokensAfter: after, Warm: warm,
		Compaction: cost.PriceCompaction(p, ttl, before, after, summaryUSD, warm)}
	r.CompactionsUSD += cc.USD()
	r.SummaryUSD += summaryUSD
	r.FreedTokens += max(before-after, 0)
	r.Pending = true
	r.Compactions = append(r.Compactions, cc)
	if n := len(r.Compactions); n > MaxCompactions {
		r.Compactions = append(r.Compactions[:0:0], r.Compactions[n-MaxCompactions:]...)
	}
	return cc
}

// Clone is a copy that shares nothing with c.
func (c *Conversation) Clone() Conversation {
	cp := *c
	if c.Misses != nil {
		cp.Misses = make(map[string]int, len(c.Misses))
		for k, v := range c.Misses {
			cp.Misses[k] = v
		}
	}
	if c.Report != nil {
		r := *c.Report
		r.Compactions = append([]CompactionCost(nil), c.Report.Compactions...)
		cp.Report = &r
	}
	return cp
}
