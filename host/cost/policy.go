package cost

import (
	"fmt"
	"time"
)

// Policy decides before each call of a conversation whether to compact
// it, from the prompt's size and the state of the prompt cache, and how
// much a compaction keeps.
type Policy struct {
	// Budget is the input budget in tokens: a prompt over it overflows,
	// so every policy compacts it.
	Budget int
	// CompactAt is the share of Budget at which a compaction is due
	// whatever the cache holds; 0 compacts only an overflowing prompt.
	CompactAt float64
	// ColdAt, above 0, compacts early: past this share of Budget when the
	// cache has expired, since the whole prompt is written anew then
	// anyway. The cache-aware policy sets it, with CompactAt at the gate's
	// emergency share, so a warm cache is kept unless the gate requires.
	ColdAt float64
	// Kept is the prompt a compaction leaves, in tokens: what is kept
	// verbatim, the agent's fixed part and the summary. With Fold set it
	// is only the first guess, before the conversation has shown how it
	// grows.
	Kept int
	// SummaryTokens is the summary's size: the output of the summary call.
	SummaryTokens int
	// MinSavings is the least share of the prompt a compaction must free
	// to be made, as the engine refuses one that frees too little (no
	// compaction storms); a prompt over the budget is then counted in
	// Overflows.
	MinSavings float64
	// Head is the start of the prompt no compaction changes (the agent's
	// system prompt and tools), in tokens: after a compaction it is still
	// read from a warm cache.
	Head int
	// CachedSummary sends the summary call, while the cache is warm and
	// when that costs less (ChooseSummaryCall), as the conversation's own
	// prompt with an instruction appended, so the cache serves its input
	// as reads; otherwise the call's input is what it folds, billed as
	// fresh input (a cold cache would bill the whole prompt so).
	CachedSummary bool
	// SummaryPrices are the compaction model's prices, at which a fresh
	// summary call is billed; unknown (the zero value) is the
	// conversation model's own.
	SummaryPrices Prices
	// Fold chooses what each compaction keeps with Fold, from the growth
	// and pauses seen so far, instead of keeping Kept.
	Fold bool
	// MinKeep is the least recent history, in tokens, a fold keeps
	// verbatim beside the head and the summary.
	MinKeep int
}

// Validate reports a policy that cannot run.
func (pol Policy) Validate() error {
	switch {
	case pol.Budget <= 0:
		return fmt.Errorf("cost: policy budget %d: want a positive token count", pol.Budget)
	case pol.CompactAt < 0 || pol.CompactAt > 1 || pol.ColdAt < 0 || pol.ColdAt > 1 || pol.MinSavings < 0 || pol.MinSavings > 1:
		return fmt.Errorf("cost: policy shares %g, %g and %g: want 0 to 1", pol.CompactAt, pol.ColdAt, pol.MinSavings)
	case pol.Kept < 0 || pol.Kept >= pol.Budget:
		return fmt.Errorf("cost: policy keeps %d tokens of a %d budget: want fewer than the budget", pol.Kept, pol.Budget)
	case pol.SummaryTokens < 0 || pol.Head < 0 || pol.MinKeep < 0:
		return fmt.Errorf("cost: policy summary %d, head %d, least kept %d tokens: want 0 or more", pol.SummaryTokens, pol.Head, pol.MinKeep)
	case pol.Head+pol.SummaryTokens+pol.MinKeep >= pol.Budget:
		return fmt.Errorf("cost: policy head %d, summary %d and least kept %d tokens fill the %d budget", pol.Head, pol.SummaryTokens, pol.MinKeep, pol.Budget)
	}
	return nil
}

// Reason is why a compaction is due; "" when none is.
type Reason string

// The reasons Due gives.
const (
	// DueOverflow: the prompt is over the budget.
	DueOverflow Reason = "overflow"
	// DueThreshold: the prompt is past CompactAt.
	DueThreshold Reason = "threshold"
	// DueCold: the cache has expired and the prompt is past ColdAt.
	DueCold Reason = "cold"
)

// Due is the one decision of when to compact: whether a prompt of tokens
// is to be compacted before it is sent. cold says the cache of the
// conversation's previous prompt has expired (it was sent more than a TTL
// ago), so the whole prompt is written anew whatever is done; a first
// prompt is not cold, since nothing was cached to lose.
func (pol Policy) Due(tokens int, cold bool) Reason {
	size, budget := float64(tokens), float64(pol.Budget)
	switch {
	case tokens > pol.Budget:
		return DueOverflow
	case pol.CompactAt > 0 && size >= pol.CompactAt*budget:
		return DueThreshold
	case pol.ColdAt > 0 && cold && size >= pol.ColdAt*budget:
		return DueCold
	}
	return ""
}

// WarmShare is the share of the budget at which the cache-aware policy
// compacts a warm cache, given the gate's compact and emergency shares:
// halfway between them. Later than the gate, since a warm cache makes the
// prompt cheap to resend and a compaction rewrites it; not at the
// emergency share, since every call after a late compaction still reads
// the prompt it could have freed (measured in RATIONALE).
func WarmShare(compactAt, emergencyAt float64) float64 {
	return (compactAt + emergencyAt) / 2
}

// trigger is the prompt at which the next compaction is due on a warm
// cache.
func (pol Policy) trigger() float64 {
	if pol.CompactAt > 0 {
		return pol.CompactAt * float64(pol.Budget)
	}
	return float64(pol.Budget)
}

// Growth is what a conversation has shown so far, for Fold: the pauses
// between its calls and how much its prompt grew across them.
type Growth struct {
	// Gaps counts the pauses seen; Expired those longer than the TTL.
	Gaps    int `json:"gaps"`
	Expired int `json:"expired"`
	// Tokens is what the prompt grew over those pauses; a prompt that
	// shrank counts no growth.
	Tokens int `json:"tokens"`
}

// Observe adds one pause of gap (0 when unknown), across which the prompt
// grew by grew tokens, with the cache's lifetime ttl.
func (g *Growth) Observe(gap, ttl time.Duration, grew int) {
	g.Gaps++
	if gap > ttl {
		g.Expired++
	}
	g.Tokens += max(grew, 0)
}

// Fold is the prompt, in tokens, a compaction of a prompt of prompt tokens
// should leave so that the expected cost per call until the next
// compaction is lowest. Keeping more makes every later call read a larger
// prefix, rewrites more now, and brings the next compaction (its summary
// call and its rewrite) sooner; the calls to come are expected to grow the
// prompt as g's did and to find the cache expired as often. Every term of
// that cost grows with what is kept, whatever the growth and the share of
// expired pauses, so once g has seen a pause Fold returns its floor: the
// head, the summary and MinKeep (the least the configuration lets a fold
// keep, which is what stands for the agent's need of recent history).
// Until g has seen a pause, Fold keeps pol.Kept. What it returns frees at
// least MinSavings of the prompt when it can.
func Fold(p Prices, ttl time.Duration, pol Policy, g Growth, prompt int) int {
	lo := pol.Head + pol.SummaryTokens + pol.MinKeep
	if g.Gaps == 0 || g.Tokens == 0 {
		return max(pol.Kept, lo)
	}
	growth := float64(g.Tokens) / float64(g.Gaps)
	cold := float64(g.Expired) / float64(g.Gaps)
	trigger := pol.trigger()
	hi := min(int(trigger-growth), int((1-pol.MinSavings)*float64(prompt)))
	if hi <= lo {
		return lo
	}
	write := p.CacheWrite5m
	if ttl >= TTL1h {
		write = p.CacheWrite1h
	}
	head, summary := float64(pol.Head), float64(pol.SummaryTokens)
	sp := pol.summaryPrices(p)
	// The summary call at the next compaction, which folds the prompt at
	// the trigger: on a warm cache it may resend the prompt before it.
	summaryCall := func(kept float64) float64 {
		shape := SummaryShape{Folded: int(trigger - kept), FoldEnd: int(trigger - (kept - head - summary)), Summary: pol.SummaryTokens}
		fresh := ChooseSummaryCall(p, sp, shape).USD
		warm := fresh
		if pol.CachedSummary {
			shape.Cached = int(trigger - growth)
			warm = ChooseSummaryCall(p, sp, shape).USD
		}
		return 1e6 * ((1-cold)*warm + cold*fresh)
	}
	rate := func(kept float64) float64 {
		calls := max(1, (trigger-kept)/growth)
		mean := (kept + trigger) / 2
		perCall := (1-cold)*(mean*p.CacheRead+growth*write) + cold*mean*write
		rewrite := (1-cold)*(head*p.CacheRead+(kept-head)*write) + cold*kept*write
		return perCall + (rewrite+summaryCall(kept))/calls
	}
	const steps = 64
	best, bestRate := lo, rate(float64(lo))
	for i := 1; i <= steps; i++ {
		k := lo + (hi-lo)*i/steps
		if r := rate(float64(k)); r < bestRate {
			best, bestRate = k, r
		}
	}
	return best
}

// summaryPrices are the prices a fresh summary call is billed at.
func (pol Policy) summaryPrices(p Prices) Prices {
	if pol.SummaryPrices.Known() {
		return pol.SummaryPrices
	}
	return p
}

// Outcome is a conversation's cost under a policy.
type Outcome struct {
	// Calls bills the conversation's own calls; SummaryUSD the summary
	// calls.
	Calls       Bill    `json:"calls"`
	SummaryUSD  float64 `json:"summary_usd"`
	USD         float64 `json:"usd"`
	Compactions int     `json:"compactions"`
	// CachedSummaries counts the summary calls that resend the cached
	// prompt (ChooseSummaryCall).
	CachedSummaries int `json:"cached_summaries"`
	// PromptTokens is the sum of the prompts sent.
	PromptTokens int `json:"prompt_tokens"`
	// Overflows counts prompts still over the budget after compacting
	// (Kept alone left too little room for a call's new messages).
	Overflows int `json:"overflows"`
	// Steps are the calls one by one, in order; their USD sum to USD.
	Steps []Step `json:"-"`
}

// Step is one call of a replayed conversation: when it was sent (zero
// when unknown), what it cost with the summary call of the compaction made
// just before it, and whether one was.
type Step struct {
	Time      time.Time
	USD       float64
	Compacted bool
}

// Simulate runs a conversation whose calls are given as they would go
// without compaction (see Uncompacted) under pol, with the prompt cache
// of Replay: before each call the policy may compact (Due), which takes
// the prompt down to pol.Kept or what Fold chooses, costs a summary call,
// and rewrites the prompt so nothing of it but pol.Head is read from the
// cache.
func Simulate(p Prices, ttl time.Duration, calls []Call, pol Policy) (Outcome, error) {
	if err := pol.Validate(); err != nil {
		return Outcome{}, err
	}
	var o Outcome
	var g Growth
	c := promptCache{ttl: ttl}
	removed := 0
	for i, call := range calls {
		if i > 0 {
			var gap time.Duration
			if !call.Time.IsZero() && !calls[i-1].Time.IsZero() {
				gap = call.Time.Sub(calls[i-1].Time)
			}
			g.Observe(gap, ttl, call.PromptTokens-calls[i-1].PromptTokens)
		}
		call.PromptTokens -= removed
		call.Rewritten, call.Freed, call.Head = false, 0, 0
		step := Step{Time: call.Time}
		due := pol.Due(call.PromptTokens, c.sent && !c.warm(call.Time)) != ""
		kept := pol.Kept
		if due && pol.Fold {
			kept = Fold(p, ttl, pol, g, call.PromptTokens)
		}
		if freed := call.PromptTokens - kept; due && freed > 0 && float64(freed) >= pol.MinSavings*float64(call.PromptTokens) {
			shape := SummaryShape{Folded: freed, FoldEnd: call.PromptTokens - max(0, kept-pol.Head-pol.SummaryTokens), Summary: pol.SummaryTokens}
			if pol.CachedSummary && c.warm(call.Time) {
				shape.Cached = c.prev
			}
			sc := ChooseSummaryCall(p, pol.summaryPrices(p), shape)
			o.SummaryUSD += sc.USD
			step.USD, step.Compacted = sc.USD, true
			if sc.Cached {
				o.CachedSummaries++
			}
			o.Compactions++
			removed += freed
			call.PromptTokens, call.Rewritten, call.Head = kept, true, min(pol.Head, kept)
		}
		if call.PromptTokens > pol.Budget {
			o.Overflows++
		}
		o.PromptTokens += call.PromptTokens
		r := c.send(call)
		o.Calls.Add(p, r)
		step.USD += r.USD(p)
		o.Steps = append(o.Steps, step)
	}
	o.USD = o.Calls.USD + o.SummaryUSD
	return o, nil
}

// CallsOf are recorded requests as calls. A prompt at least a fifth
// smaller than the one before marks a compaction the agent made, which
// freed at least the difference, and whose cache reads are the head it
// left unchanged; a smaller drop (an agent leaving out reasoning it sent
// before) is not one.
func CallsOf(reqs []Request) []Call {
	calls := make([]Call, len(reqs))
	prev := 0
	for i, r := range reqs {
		n := r.PromptTokens()
		calls[i] = Call{Time: r.Time, PromptTokens: n, OutputTokens: r.Output}
		if i > 0 && 5*n <= 4*prev {
			calls[i].Rewritten, calls[i].Freed, calls[i].Head = true, prev-n, r.CacheRead
		}
		prev = n
	}
	return calls
}
