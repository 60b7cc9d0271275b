package host

import (
	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
)

// KeepRecent is the recent history, in tokens, the gate's next compaction
// of s keeps verbatim for a request req. Under the threshold policy it is
// KeepRecentTokens. Under the cache-aware policy it is what cost.Fold
// finds cheapest over the calls to come, given req.Growth (how the
// conversation grew and how often its cache expired between calls) and
// the model's prices: the request's overhead and the pinned messages are
// the head a compaction leaves cached, the summary is rewritten, and
// every call until the next compaction reads what is kept. Without a
// pause seen, or for a model the catalog does not price, it is
// KeepRecentTokens; it never keeps less than a quarter of it.
func (e *Engine) KeepRecent(s *Session, req Request) int {
	keep := e.cfg.KeepRecentTokens
	if e.cfg.Policy != PolicyCacheAware || req.Growth.Gaps == 0 {
		return keep
	}
	m, ok := catalog.Lookup(e.cfg.Model)
	if !ok || e.cfg.Model == "" || !m.Prices().Known() {
		return keep
	}
	overhead := req.ToolSchemaTokens + req.DynamicTokens
	s.mu.Lock()
	used := e.calibrated(s.contextTokens() + overhead)
	// The pinned system messages open the prompt before the summary.
	head := overhead
	for _, pi := range s.pinned {
		if s.msgs[pi].msg.Role == abi.RoleSystem {
			head += s.msgs[pi].tokens
		}
	}
	summary := e.cfg.summaryTarget(int(e.budget.Load())-overhead, s.foldableTokens(s.viewStart, len(s.msgs)))
	s.mu.Unlock()
	pol := e.Policy()
	pol.Head, pol.SummaryTokens = head, summary
	pol.MinKeep = keep / 4
	pol.Kept = min(head+summary+keep, pol.Budget-1)
	pol.Fold = true
	if pol.Validate() != nil {
		return keep
	}
	kept := cost.Fold(m.Prices(), e.cfg.CacheTTL, pol, req.Growth, used)
	return max(kept-head-summary, pol.MinKeep)
}
