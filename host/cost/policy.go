package cost

import (
	"fmt"
	"time"
)

// Policy decides before each call of a conversation whether to compact
// it, from the prompt's size and the state of the prompt cache.
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
	// verbatim, the agent's fixed part and the summary.
	Kept int
	// SummaryTokens is the summary's size: the output of the summary call,
	// whose input is what it folds.
	SummaryTokens int
	// MinSavings is the least share of the prompt a compaction must free
	// to be made, as the engine refuses one that frees too little (no
	// compaction storms); a prompt over the budget is then counted in
	// Overflows.
	MinSavings float64
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
	case pol.SummaryTokens < 0:
		return fmt.Errorf("cost: policy summary of %d tokens: want 0 or more", pol.SummaryTokens)
	}
	return nil
}

// Outcome is a conversation's cost under a policy.
type Outcome struct {
	// Calls bills the conversation's own calls; SummaryUSD the summary
	// calls, billed as fresh input and output.
	Calls       Bill    `json:"calls"`
	SummaryUSD  float64 `json:"summary_usd"`
	USD         float64 `json:"usd"`
	Compactions int     `json:"compactions"`
	// PromptTokens is the sum of the prompts sent.
	PromptTokens int `json:"prompt_tokens"`
	// Overflows counts prompts still over the budget after compacting
	// (Kept alone left too little room for a call's new messages).
	Overflows int `json:"overflows"`
}

// Simulate runs a conversation whose calls are given as they would go
// without compaction (see Uncompacted) under pol, with the prompt cache
// of Replay: before each call the policy may compact, which takes the
// prompt down to pol.Kept, costs a summary call, and rewrites the prompt
// so nothing of it is read from the cache.
func Simulate(p Prices, ttl time.Duration, calls []Call, pol Policy) (Outcome, error) {
	if err := pol.Validate(); err != nil {
		return Outcome{}, err
	}
	var o Outcome
	c := promptCache{ttl: ttl}
	removed := 0
	budget := float64(pol.Budget)
	for _, call := range calls {
		call.PromptTokens -= removed
		call.Rewritten, call.Freed = false, 0
		size := float64(call.PromptTokens)
		due := call.PromptTokens > pol.Budget ||
			pol.CompactAt > 0 && size >= pol.CompactAt*budget ||
			pol.ColdAt > 0 && !c.warm(call.Time) && c.sent && size >= pol.ColdAt*budget
		if freed := call.PromptTokens - pol.Kept; due && freed > 0 && float64(freed) >= pol.MinSavings*size {
			folded := call.PromptTokens - pol.Kept
			summary := Request{Input: folded, Output: pol.SummaryTokens}
			o.SummaryUSD += summary.USD(p)
			o.Compactions++
			removed += folded
			call.PromptTokens, call.Rewritten = pol.Kept, true
		}
		if call.PromptTokens > pol.Budget {
			o.Overflows++
		}
		o.PromptTokens += call.PromptTokens
		o.Calls.Add(p, c.send(call))
	}
	o.USD = o.Calls.USD + o.SummaryUSD
	return o, nil
}

// CallsOf are recorded requests as calls. A prompt at least a fifth
// smaller than the one before marks a compaction the agent made, which
// freed at least the difference; a smaller drop (an agent leaving out
// reasoning it sent before) is not one.
func CallsOf(reqs []Request) []Call {
	calls := make([]Call, len(reqs))
	prev := 0
	for i, r := range reqs {
		n := r.PromptTokens()
		calls[i] = Call{Time: r.Time, PromptTokens: n, OutputTokens: r.Output}
		if i > 0 && 5*n <= 4*prev {
			calls[i].Rewritten, calls[i].Freed = true, prev-n
		}
		prev = n
	}
	return calls
}
