package eval

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
)

// replayConfig is one run.
type replayConfig struct {
	session  *formats.Session
	name     string
	window   int
	strategy string
	impl     host.Strategy
	model    host.ModelClient
	usage    usageTranslation
	// truncators, when set, cap tool results before they are appended.
	truncators host.TruncatorResolver
}

// maxListed bounds the error strings a run keeps.
const maxListed = 10

// replay feeds the session to a fresh engine as the agent did and measures
// every gate call and compaction.
func replay(ctx context.Context, rc replayConfig) RunResult {
	r := RunResult{Session: rc.name, Window: rc.window, Strategy: rc.strategy, textActions: textActions(rc.session)}
	began := time.Now()
	timer := &modelTimer{}
	strat := &timedStrategy{inner: rc.impl}
	opts := []host.Option{
		host.WithStrategy(rc.strategy, strat),
		host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	}
	if rc.model != nil {
		timer.client = rc.model
		opts = append(opts, host.WithModel(timer))
	}
	if rc.truncators != nil {
		opts = append(opts, host.WithTruncatorResolver(rc.truncators))
	}
	// No fallbacks: a failing strategy goes straight to the emergency
	// path, so what is measured is the strategy named.
	eng, err := host.New(host.Config{ContextWindow: rc.window, Strategy: rc.strategy, Fallbacks: []string{}}, opts...)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.Budget = eng.Budget().Input

	var events []host.Event
	unsubscribe := eng.Subscribe(func(e host.Event) { events = append(events, e) })
	defer unsubscribe()

	mem := startHeapSampler()
	defer mem.stop()

	msgs := rc.session.Messages
	index := make(map[string]int, len(msgs))
	for i := range msgs {
		index[msgs[i].ID] = i
	}
	folded := newFoldedOps(msgs)
	sess := eng.NewSession()
	points := gatePoints(msgs)
	pi := 0

	gate := func(at int) {
		call := pi
		before := sess.ContextTokens()
		events = events[:0]
		timer.reset()
		strat.reset()
		_, err := eng.EnsureFits(ctx, sess, host.Request{})
		mem.sample()
		r.Gates++
		if err != nil && len(r.GateErrors) < maxListed {
			r.GateErrors = append(r.GateErrors, fmt.Sprintf("call %d: %v", call, err))
		}
		view := sess.Context()
		if verr := Valid(view); verr != nil {
			if len(r.Invalid) < maxListed {
				r.Invalid = append(r.Invalid, fmt.Sprintf("call %d: %v", call, verr))
			}
		} else {
			r.ValidGates++
		}
		pt := Point{Call: call, Before: before, After: sess.ContextTokens()}
		var text string
		for _, e := range events {
			switch e := e.(type) {
			case *host.CompactionEvent:
				pt.Compacted = true
				if text == "" {
					text = ContextText(view)
				}
				r.addCompaction(e, call, at, sess, index, folded, msgs, text, timer.total(), strat.total())
			case *host.PruneEvent:
				r.Prunes++
			case *host.FallbackEvent:
				r.Fallbacks++
			}
		}
		r.Series = append(r.Series, pt)
	}

	toolNames := map[string]string{} // tool_use ID -> tool name
	for i := range msgs {
		for _, b := range msgs[i].Content {
			if b.Type == abi.BlockToolUse {
				toolNames[b.ID] = b.Name
			}
		}
	}
	for i := range msgs {
		if pi < len(points) && points[pi] == i {
			gate(i)
			pi++
		}
		m := msgs[i]
		if rc.truncators != nil {
			m = truncateResults(ctx, eng, m, toolNames, &r.Truncated)
		}
		if m.Role == abi.RoleAssistant {
			m.Usage = rc.usage.usageFor(i, sess.ContextTokens(), msgs[i].Usage)
			events = events[:0]
			err = eng.AppendReply(sess, m)
			for _, e := range events {
				if _, ok := e.(*host.OverflowEvent); ok {
					r.Overflows++
				}
			}
		} else {
			err = sess.Append(m)
		}
		if err != nil {
			r.Err = fmt.Sprintf("append message %d: %v", i, err)
			return r
		}
	}
	if pi < len(points) {
		gate(len(msgs))
	}
	r.Calls = len(points)
	r.Compression = ratio(r.TokensBefore, r.TokensAfter)
	r.PeakHeapBytes = mem.stop()
	r.WallMillis = millis(time.Since(began))
	return r
}

// addCompaction measures one compaction against the context after the gate.
func (r *RunResult) addCompaction(e *host.CompactionEvent, call, at int, sess *host.Session, index map[string]int,
	folded *foldedOps, msgs []abi.Message, text string, modelTime, strategyTime time.Duration) {
	c := CompactionResult{
		Call: call, Strategy: e.Strategy, Emergency: e.Emergency, TokensBefore: e.TokensBefore, TokensAfter: e.TokensAfter,
		MessagesFolded: e.MessagesFolded, DurationMillis: millis(e.Duration), EngineMillis: millis(e.Duration - modelTime),
		StrategyMillis: millis(strategyTime - modelTime), HostMillis: millis(e.Duration - strategyTime),
	}
	// The engine's calibration clamps at zero: a fit whose offset went
	// negative reads a context of 45k tokens as empty. A compaction that
	// leaves tokens never reports none; the chars/4 figure stands in and
	// the run counts it.
	if raw := sess.ContextTokens(); c.TokensAfter <= 0 && raw > 0 {
		c.TokensAfter, c.Uncalibrated = raw, true
		r.UncalibratedAfter++
	}
	for _, comp := range sess.Compactions() {
		if comp.ID == e.CompactionID {
			c.Cut = index[comp.FoldedThrough] + 1
			c.SummaryTokens = (utf8.RuneCountInString(comp.Summary) + 3) / 4
		}
	}
	c.Recall = ArtifactRecall(folded.before(c.Cut), text)
	if req, ok := latestRequest(msgs[:c.Cut], r.textActions); ok {
		c.RequestFolded, c.RequestRetained = true, Retained(req, text)
		latest, _ := latestRequest(msgs[:at], r.textActions)
		c.LatestRetained = Retained(latest, text)
	}
	r.Compactions = append(r.Compactions, c)
	r.TokensBefore += c.TokensBefore
	r.TokensAfter += c.TokensAfter
	r.Recall.add(c.Recall)
	if c.RequestFolded {
		r.RequestsFolded++
		if c.RequestRetained {
			r.RequestsRetained++
		}
		if c.LatestRetained {
			r.LatestRetained++
		}
	}
	if c.Emergency {
		r.Emergencies++
	}
	r.EngineMillis.add(c.EngineMillis)
	r.HostMillis.add(c.HostMillis)
}

func ratio(a, b int) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// foldedOps gives the engine's own record of the files read and modified
// in msgs[:cut], for growing cuts: a session of the messages before the
// cut, extended as the cut moves on.
type foldedOps struct {
	msgs []abi.Message
	sess *host.Session
	n    int
}

func newFoldedOps(msgs []abi.Message) *foldedOps {
	eng, err := host.New(host.Config{ContextWindow: 100_000_000, Tokenizer: "chars", DisableCompaction: true})
	if err != nil {
		panic(err) // a fixed, valid configuration
	}
	return &foldedOps{msgs: msgs, sess: eng.NewSession()}
}

func (f *foldedOps) before(cut int) abi.FileOps {
	if cut < f.n { // cuts only grow in a replay; start over otherwise
		f.sess, f.n = newFoldedOps(f.msgs).sess, 0
	}
	f.sess.Append(f.msgs[f.n:cut]...)
	f.n = cut
	return f.sess.FileOps()
}

// timedStrategy measures the time the engine spends in the strategy.
type timedStrategy struct {
	inner host.Strategy
	spent atomic.Int64
}

func (t *timedStrategy) Summarize(ctx context.Context, svc plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	began := time.Now()
	defer func() { t.spent.Add(int64(time.Since(began))) }()
	return t.inner.Summarize(ctx, svc, req)
}

func (t *timedStrategy) reset()               { t.spent.Store(0) }
func (t *timedStrategy) total() time.Duration { return time.Duration(t.spent.Load()) }

// truncateResults caps the tool results of m as an agent using the
// engine's truncators does before appending them.
func truncateResults(ctx context.Context, eng *host.Engine, m abi.Message, tools map[string]string, n *int) abi.Message {
	copied := false
	for bi, b := range m.Content {
		if b.Type != abi.BlockToolResult {
			continue
		}
		out := eng.TruncateToolOutput(ctx, tools[b.ToolUseID], []byte(b.Text), 0)
		if len(out) == len(b.Text) {
			continue
		}
		if !copied {
			m.Content = append([]abi.Block(nil), m.Content...)
			copied = true
		}
		m.Content[bi].Text = string(out)
		*n++
	}
	return m
}

// modelTimer measures the time strategies spend waiting for the model.
type modelTimer struct {
	client host.ModelClient
	spent  atomic.Int64
}

func (t *modelTimer) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	began := time.Now()
	defer func() { t.spent.Add(int64(time.Since(began))) }()
	return t.client.Complete(ctx, req)
}

func (t *modelTimer) Model() string        { return t.client.Model() }
func (t *modelTimer) reset()               { t.spent.Store(0) }
func (t *modelTimer) total() time.Duration { return time.Duration(t.spent.Load()) }

// memoryMethod says how PeakHeapBytes is measured.
const memoryMethod = "Go heap in use (runtime/metrics /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes, the same figure as MemStats.HeapInuse), " +
	"high-water mark sampled every 2 ms and after every gate call, after a GC at the start of the run; it includes the loaded sessions and " +
	"wasm linear memory (a Go slice in the host's runtime) but not compiled wasm code"

// heapSampler tracks the high-water mark of the Go heap in use.
type heapSampler struct {
	samples []metrics.Sample
	mu      sync.Mutex
	peak    uint64
	done    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

func startHeapSampler() *heapSampler {
	runtime.GC()
	h := &heapSampler{
		samples: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}},
		done:    make(chan struct{}),
	}
	h.sample()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-tick.C:
				h.sample()
			}
		}
	}()
	return h
}

func (h *heapSampler) sample() {
	h.mu.Lock()
	defer h.mu.Unlock()
	metrics.Read(h.samples)
	var n uint64
	for _, s := range h.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			n += s.Value.Uint64()
		}
	}
	h.peak = max(h.peak, n)
}

// stop ends sampling and returns the peak.
func (h *heapSampler) stop() uint64 {
	h.stopped.Do(func() {
		close(h.done)
		h.wg.Wait()
	})
	h.sample()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak
}
