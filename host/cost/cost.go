// Package cost is the cost model of a conversation: what each model call
// was billed by kind of token (fresh input, cache reads, cache writes by
// lifetime, output), a replay of the provider's prompt cache, the same
// conversation without its compactions, and what one compaction costs.
package cost

import (
	"math"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/catalog"
)

// Prices are a model's prices in USD per million tokens; see
// catalog.Prices and catalog.ParsePrices.
type Prices = catalog.Prices

// Cache lifetimes a provider offers for a prompt-cache entry: it expires
// after this long without a request that reads it.
const (
	TTL5m = 5 * time.Minute
	TTL1h = time.Hour
)

// Request is one model call as the provider billed it. The token counts
// are disjoint: Input is the input neither read from nor written to the
// cache.
type Request struct {
	// Time is when the request was sent; zero when unknown.
	Time  time.Time `json:"time,omitzero"`
	Model string    `json:"model,omitempty"`
	// Thread names the conversation the request belongs to when a file
	// holds several (a sub-agent's, beside the main one's ""): each has
	// its own prompt and cache.
	Thread       string `json:"thread,omitempty"`
	Input        int    `json:"input_tokens"`
	CacheRead    int    `json:"cache_read_tokens"`
	CacheWrite5m int    `json:"cache_write_5m_tokens"`
	CacheWrite1h int    `json:"cache_write_1h_tokens"`
	Output       int    `json:"output_tokens"`
}

// FromUsage is the request a Usage reports. Usage does not split
// cache writes by lifetime; they are taken as 5-minute writes, the
// providers' default.
func FromUsage(u abi.Usage) Request {
	return Request{Input: u.InputTokens, CacheRead: u.CacheReadTokens, CacheWrite5m: u.CacheWriteTokens, Output: u.OutputTokens}
}

// PromptTokens is the whole input of the request.
func (r Request) PromptTokens() int {
	return r.Input + r.CacheRead + r.CacheWrite5m + r.CacheWrite1h
}

// USD is what the request cost at prices p.
func (r Request) USD(p Prices) float64 {
	return (float64(r.Input)*p.Input + float64(r.CacheRead)*p.CacheRead + float64(r.CacheWrite5m)*p.CacheWrite5m +
		float64(r.CacheWrite1h)*p.CacheWrite1h + float64(r.Output)*p.Output) / 1e6
}

// Bill sums requests: their tokens by how each was billed, and the cost.
type Bill struct {
	Requests     int     `json:"requests"`
	Input        int     `json:"input_tokens"`
	CacheRead    int     `json:"cache_read_tokens"`
	CacheWrite5m int     `json:"cache_write_5m_tokens"`
	CacheWrite1h int     `json:"cache_write_1h_tokens"`
	Output       int     `json:"output_tokens"`
	USD          float64 `json:"usd"`
}

// Add bills one more request at prices p.
func (b *Bill) Add(p Prices, r Request) {
	b.Requests++
	b.Input += r.Input
	b.CacheRead += r.CacheRead
	b.CacheWrite5m += r.CacheWrite5m
	b.CacheWrite1h += r.CacheWrite1h
	b.Output += r.Output
	b.USD += r.USD(p)
}

// BillRequests is the bill of recorded requests at prices p.
func BillRequests(p Prices, reqs []Request) Bill {
	var b Bill
	for _, r := range reqs {
		b.Add(p, r)
	}
	return b
}

// Call is a model call as the cache model replays it: its prompt's size,
// its reply, and whether the prompt still begins with the previous one.
type Call struct {
	Time         time.Time
	PromptTokens int
	OutputTokens int
	// Rewritten marks a prompt that does not begin with the previous
	// prompt (a compaction spliced its summary in before it): none of it
	// is in the cache. A prompt smaller than the one before that is not
	// marked is taken as a prefix of it, read from a warm cache whole.
	Rewritten bool
	// Freed is what the compactions just before this call took out of the
	// prompt, in tokens; Uncompacted puts it back.
	Freed int
	// Head is, for a Rewritten prompt, how much of its start a compaction
	// left as it was (the system prompt and tools): read from a warm
	// cache like an unchanged prefix.
	Head int
}

// Replay bills calls the way a provider's prompt cache does, each
// call marking the end of its prompt as a cache breakpoint: while the
// entry is warm (the gap since the previous call is at most ttl) and the
// prompt begins with the previous one, the previous prompt is read from the
// cache and only the rest is written; otherwise (expired, or Rewritten)
// the whole prompt is written. Writes are priced for ttl (TTL1h or else 5 minutes). A
// call with no time is taken to follow at once.
func Replay(p Prices, ttl time.Duration, calls []Call) Bill {
	var b Bill
	c := promptCache{ttl: ttl}
	for _, call := range calls {
		b.Add(p, c.send(call))
	}
	return b
}

// promptCache is the provider's cache of one conversation, as Replay
// models it.
type promptCache struct {
	ttl  time.Duration
	sent bool
	prev int       // the previous prompt, in tokens
	last time.Time // when it was sent, if known
}

// warm reports whether the previous prompt is still cached at t.
func (c *promptCache) warm(t time.Time) bool {
	return c.sent && (t.IsZero() || c.last.IsZero() || t.Sub(c.last) <= c.ttl)
}

// send is the request call is billed as, and caches its prompt.
func (c *promptCache) send(call Call) Request {
	r := Request{Time: call.Time, Output: call.OutputTokens}
	write := call.PromptTokens
	if c.warm(call.Time) {
		cached := c.prev
		if call.Rewritten {
			cached = min(cached, call.Head)
		}
		read := min(cached, call.PromptTokens)
		r.CacheRead, write = read, call.PromptTokens-read
	}
	if c.ttl >= TTL1h {
		r.CacheWrite1h = write
	} else {
		r.CacheWrite5m = write
	}
	c.sent, c.prev = true, call.PromptTokens
	c.touch(call.Time)
	return r
}

// touch marks the entry as read or written at t.
func (c *promptCache) touch(t time.Time) {
	if !t.IsZero() {
		c.last = t
	}
}

// Uncompacted is calls as they would have gone without their
// compactions: every prompt after one carries what it freed, and no
// prompt is rewritten by one. (A prompt that outgrows the window would
// have failed; the replay does not model that.)
func Uncompacted(calls []Call) []Call {
	out := make([]Call, len(calls))
	freed := 0
	for i, c := range calls {
		if c.Freed > 0 {
			freed += c.Freed
			c.Rewritten, c.Head = false, 0
		}
		c.PromptTokens += freed
		c.Freed = 0
		out[i] = c
	}
	return out
}

// Compaction is what one compaction costs and what it saves, in USD.
type Compaction struct {
	// SummaryUSD is the strategy's model calls.
	SummaryUSD float64 `json:"summary_usd"`
	// RewriteUSD is the next request's prompt up to the end of the kept
	// messages, written to the cache anew: a compaction changes the
	// prefix, so nothing of it is read from the cache.
	RewriteUSD float64 `json:"rewrite_usd"`
	// UncompactedUSD is what the same part of the next request costs
	// without the compaction: the old prompt read from a warm cache, or
	// written again to a cold one.
	UncompactedUSD float64 `json:"uncompacted_usd"`
	// SavedPerRequestUSD is what every later request saves while the
	// cache stays warm: the freed tokens are no longer read.
	SavedPerRequestUSD float64 `json:"saved_per_request_usd"`
	// BreakEvenRequests counts the requests, the next one included, after
	// which the compaction has paid for itself with the cache kept warm;
	// 0 when it never does.
	BreakEvenRequests int `json:"break_even_requests"`
}

// USD is the compaction's own cost: the summary and the rewrite.
func (c Compaction) USD() float64 { return c.SummaryUSD + c.RewriteUSD }

// PriceCompaction prices a compaction that took a prompt of tokensBefore
// to tokensAfter with summary calls that cost summaryUSD (priced at the
// compaction model's prices, which may not be p;
// (host.CompactionEvent.CostUSD is that figure). warm says whether
// the cache of the prompt before is still alive (its last request is at
// most a TTL old); cache writes are priced for ttl.
func PriceCompaction(p Prices, ttl time.Duration, tokensBefore, tokensAfter int, summaryUSD float64, warm bool) Compaction {
	write := p.CacheWrite5m
	if ttl >= TTL1h {
		write = p.CacheWrite1h
	}
	before, after := float64(tokensBefore), float64(tokensAfter)
	c := Compaction{
		SummaryUSD:         summaryUSD,
		RewriteUSD:         after * write / 1e6,
		UncompactedUSD:     before * write / 1e6,
		SavedPerRequestUSD: max(before-after, 0) * p.CacheRead / 1e6,
	}
	if warm {
		c.UncompactedUSD = before * p.CacheRead / 1e6
	}
	// Request n costs the compacted conversation USD() + (n-1)·after·read
	// and the uncompacted one UncompactedUSD + (n-1)·before·read.
	extra := c.USD() - c.UncompactedUSD
	switch {
	case extra <= 0:
		c.BreakEvenRequests = 1
	case c.SavedPerRequestUSD > 0:
		if n := 1 + math.Ceil(extra/c.SavedPerRequestUSD); n < 1<<30 {
			c.BreakEvenRequests = int(n)
		}
	}
	return c
}

// Replayer is Replay a call at a time, for a conversation whose calls
// arrive one by one. Its fields are the cache's state, kept (as JSON)
// between calls; the zero value with TTL set is a conversation that has
// sent nothing.
type Replayer struct {
	TTL time.Duration `json:"ttl"`
	// Sent says a prompt was sent; Prev is its size and Last its time.
	Sent bool      `json:"sent,omitempty"`
	Prev int       `json:"prev_tokens,omitempty"`
	Last time.Time `json:"last,omitzero"`
}

// Send is the request call is billed as, as Replay bills it after the
// calls sent so far.
func (r *Replayer) Send(call Call) Request {
	c := promptCache{ttl: r.TTL, sent: r.Sent, prev: r.Prev, last: r.Last}
	req := c.send(call)
	r.Sent, r.Prev, r.Last = c.sent, c.prev, c.last
	return req
}
