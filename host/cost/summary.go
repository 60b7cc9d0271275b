package cost

// InstructionTokens is what a summary call's instructions add to its
// prompt, as the cost model counts them: the strategy's system prompt and
// framing in a fresh call, the instruction appended in a cached one.
const InstructionTokens = 1000

// SummaryShape is what decides how a compaction's summary is asked for,
// in tokens.
type SummaryShape struct {
	// Cached is the conversation's prompt the provider's cache holds warm
	// (the previous request's prompt); 0 when the cache is cold or holds
	// nothing.
	Cached int
	// Folded is what the compaction folds: the input of a fresh call.
	Folded int
	// FoldEnd is the prompt up to the compaction's cut (head, folded
	// messages): what a cached call must send at least.
	FoldEnd int
	// Summary is the summary's size, the call's output.
	Summary int
}

// SummaryCall is how a compaction's summary is asked for, and what the
// call is expected to be billed.
type SummaryCall struct {
	// Cached says the call resends the conversation's cached prompt (up
	// to its cache breakpoint, or to the cut when that is further) to the
	// conversation's own model with an instruction appended: the cached
	// part is billed as cache reads, the rest and the instruction as
	// fresh input. Otherwise the call sends the folded messages, fresh,
	// to the compaction model.
	Cached  bool    `json:"cached"`
	Request Request `json:"request"`
	USD     float64 `json:"usd"`
}

// ChooseSummaryCall is the one decision between the two ways of asking
// for a summary, made by the proxy before each compaction and by Simulate
// for each modelled one: the cached prompt at the conversation model's
// prices p while it is warm, when that costs less than the folded
// messages at the compaction model's prices sp.
func ChooseSummaryCall(p, sp Prices, s SummaryShape) SummaryCall {
	fresh := Request{Input: s.Folded + InstructionTokens, Output: s.Summary}
	best := SummaryCall{Request: fresh, USD: fresh.USD(sp)}
	if s.Cached <= 0 {
		return best
	}
	cached := Request{CacheRead: s.Cached, Input: max(0, s.FoldEnd-s.Cached) + InstructionTokens, Output: s.Summary}
	if usd := cached.USD(p); usd < best.USD {
		return SummaryCall{Cached: true, Request: cached, USD: usd}
	}
	return best
}
