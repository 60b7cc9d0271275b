package host

import (
	"sync"
	"time"
)

// Event is something the engine did. It is one of *CompactionEvent,
// *PruneEvent, *TruncationEvent, *FallbackEvent or *OverflowEvent.
type Event interface{ event() }

// CompactionEvent reports a compaction that was spliced into a session.
type CompactionEvent struct {
	Session        string
	CompactionID   string
	Strategy       string
	Offline        bool
	Emergency      bool
	Manual         bool
	TokensBefore   int
	TokensAfter    int
	MessagesFolded int
	// Turn is the number of user requests in the session so far.
	Turn     int
	Duration time.Duration
	// ModelUsage and CostUSD cover the model calls the strategy made.
	ModelUsage Usage
	CostUSD    float64
}

// PruneEvent reports old tool results shortened in place.
type PruneEvent struct {
	Session      string
	Results      int
	TokensBefore int
	TokensAfter  int
}

// TruncationEvent reports a tool output capped before it entered a session.
type TruncationEvent struct {
	Tool, Category string
	BytesBefore    int
	BytesAfter     int
}

// FallbackEvent reports a strategy that failed and the one tried next.
type FallbackEvent struct {
	Session string
	From    string
	To      string
	Err     error
}

// OverflowEvent reports a context overflow the engine recovered from.
type OverflowEvent struct {
	Session  string
	Provider string
	Reason   string
	// Silent is true when usage, not an error, showed the overflow.
	Silent bool
	// AdoptedWindow is the window the error stated, now used, or 0.
	AdoptedWindow int
}

func (*CompactionEvent) event() {}
func (*PruneEvent) event()      {}
func (*TruncationEvent) event() {}
func (*FallbackEvent) event()   {}
func (*OverflowEvent) event()   {}

// bus delivers events to subscribers synchronously, in order.
type bus struct {
	mu   sync.Mutex
	next int
	subs map[int]func(Event)
}

func (b *bus) subscribe(fn func(Event)) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[int]func(Event){}
	}
	id := b.next
	b.next++
	b.subs[id] = fn
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.subs, id)
	}
}

func (b *bus) emit(e Event) {
	b.mu.Lock()
	fns := make([]func(Event), 0, len(b.subs))
	for i := 0; i < b.next; i++ {
		if fn, ok := b.subs[i]; ok {
			fns = append(fns, fn)
		}
	}
	b.mu.Unlock()
	for _, fn := range fns {
		fn(e)
	}
}
