package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
	"github.com/compact-host/compact-host/host/internal/tokens"
	"github.com/compact-host/compact-host/host/overflow"
)

// Services is what the engine offers a strategy or truncator during one
// call: a model completion and token counting. It is the same type as
// plugin.Services.
type Services = pluginapi.Services

// Strategy summarizes folded messages. Plugins of every transport
// (*plugin.Plugin) implement it; so can a Go value linked into the agent.
type Strategy interface {
	Summarize(ctx context.Context, svc Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error)
}

// StrategyFunc adapts a function to Strategy.
type StrategyFunc func(ctx context.Context, svc Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error)

// Summarize calls f.
func (f StrategyFunc) Summarize(ctx context.Context, svc Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	return f(ctx, svc, req)
}

// StrategyResolver finds a strategy by name.
type StrategyResolver func(name string) (Strategy, error)

// ModelClient is a model the engine's strategies may call. The clients of
// package host/provider implement it.
type ModelClient interface {
	Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error)
	Model() string
}

// ErrUnknownStrategy is returned (wrapped) for a strategy no source has.
var ErrUnknownStrategy = errors.New("host: unknown strategy")

// Option configures an Engine beyond its Config: the parts that are code.
type Option func(*Engine)

// WithStrategy registers an in-process strategy under name. It takes
// precedence over the resolver's.
func WithStrategy(name string, s Strategy) Option {
	return func(e *Engine) { e.local[name] = s }
}

// WithStrategyResolver sets where strategies not registered with
// WithStrategy are found, typically a plugin registry.
func WithStrategyResolver(r StrategyResolver) Option {
	return func(e *Engine) { e.resolve = r }
}

// WithModel sets the model strategies call. Without one, every strategy
// runs offline.
func WithModel(m ModelClient) Option { return func(e *Engine) { e.model = m } }

// WithLogger sets the engine's logger. Default: slog.Default().
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// Engine decides when a session must shrink and shrinks it. One Engine
// serves any number of sessions for one model; it is safe for concurrent use.
type Engine struct {
	cfg     resolved
	counter tokens.Counter
	local   map[string]Strategy
	resolve StrategyResolver
	// truncators and categories serve TruncateToolOutput.
	truncators TruncatorResolver
	categories map[string]string
	model      ModelClient
	// promptSummarizer, when set, is asked for a summary before the
	// strategies (WithPromptSummarizer).
	promptSummarizer PromptSummarizer
	log              *slog.Logger
	events           bus
	// maxSessionBytes bounds the session logs read; see WithMaxSessionBytes.
	maxSessionBytes int64

	mu       sync.Mutex
	calib    tokens.Calibration
	breakers map[string]*breaker
	// window and budget start from the config and shrink when a provider
	// states a smaller window in an overflow error.
	window, budget atomic.Int64
}

// New builds an engine.
func New(cfg Config, opts ...Option) (*Engine, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	counter, err := tokens.New(cfg.Tokenizer, cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("host: config: %w", err)
	}
	e := &Engine{cfg: r, counter: counter, local: map[string]Strategy{}, log: slog.Default(), breakers: map[string]*breaker{},
		categories: mergeCategories(cfg.ToolCategories)}
	e.window.Store(int64(r.ContextWindow))
	e.budget.Store(int64(r.budget))
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// Budget reports the engine's resolved window and thresholds.
func (e *Engine) Budget() Budget {
	return Budget{ContextWindow: int(e.window.Load()), MaxOutputTokens: e.cfg.MaxOutputTokens, Input: int(e.budget.Load()),
		PruneAt: e.cfg.pruneAt, CompactAt: e.cfg.compactAt, EmergencyAt: e.cfg.emergencyAt,
		KeepRecentTokens: e.cfg.KeepRecentTokens, SummaryTokens: e.cfg.SummaryTokens, MinSavings: e.cfg.MinSavings,
		Policy: e.cfg.Policy, ColdShare: e.cfg.ColdShare, CacheTTL: e.cfg.CacheTTL}
}

// Policy is the engine's compaction policy at its current budget: when
// the gate compacts (cost.Policy.Due) under Config.Policy.
func (e *Engine) Policy() cost.Policy {
	pol := cost.Policy{Budget: int(e.budget.Load()), CompactAt: e.cfg.compactAt, MinSavings: e.cfg.MinSavings,
		SummaryTokens: e.cfg.SummaryTokens}
	if e.cfg.Policy == PolicyCacheAware {
		pol.CompactAt, pol.ColdAt = cost.WarmShare(e.cfg.compactAt, e.cfg.emergencyAt), e.cfg.ColdShare
	}
	return pol
}

// Due reports whether the gate compacts a request of used tokens (as
// Session.ContextTokens plus the request's overhead count them), and
// why; cold says the conversation's prompt cache has expired. "" when it
// does not.
func (e *Engine) Due(used int, cold bool) cost.Reason {
	return e.Policy().Due(e.calibrated(used), cold)
}

// Tokenizer names the token counter in use ("chars/4", "o200k", "cl100k").
func (e *Engine) Tokenizer() string { return e.counter.Name() }

// CountTokens estimates text with the engine's counter, uncalibrated. Use
// it to size tool schemas once and pass the figure in every Request.
func (e *Engine) CountTokens(text string) int { return e.counter.Count(text) }

// Calibration is the current calibration factor and the reports behind it.
func (e *Engine) Calibration() (factor float64, samples int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calib.Factor(), e.calib.Samples()
}

// CalibrationOffset is the tokens every request carries beyond its
// estimate, as learnt from usage reports: a system prompt or tool schemas
// the engine is not told about.
func (e *Engine) CalibrationOffset() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calib.Offset()
}

// Subscribe calls fn for every event, synchronously, until the returned
// function is called.
func (e *Engine) Subscribe(fn func(Event)) (unsubscribe func()) { return e.events.subscribe(fn) }

// NewSession returns an empty in-memory session.
func (e *Engine) NewSession() *Session {
	var b [6]byte
	rand.Read(b[:])
	s := newSession("session-"+hex.EncodeToString(b[:]), e.counter)
	s.files = newFileOps(&e.cfg.FileTools)
	return s
}

// Request is what the next model call adds to the context beyond the
// session's messages.
type Request struct {
	// ToolSchemaTokens is the size of the tool definitions sent.
	ToolSchemaTokens int
	// DynamicTokens is per-request context: a system prompt addendum,
	// retrieved documents, the date.
	DynamicTokens int
	// CacheCold says the conversation's prompt cache has expired: its
	// last request is older than the cache's TTL. The cache-aware policy
	// compacts early then, since the whole prompt is written anew anyway.
	CacheCold bool
	// Growth is what the conversation has shown of its pauses and growth
	// between model calls (the caller's cache state tracks it). Under the
	// cache-aware policy a gate compaction keeps what cost.Fold finds
	// cheapest for it; without pauses seen it keeps KeepRecentTokens.
	// The threshold policy ignores it.
	Growth cost.Growth
}

// Action is what a gate check did.
type Action int

// Actions, in increasing order of force.
const (
	ActionNone Action = iota
	ActionPruned
	ActionCompacted
	ActionEmergency
)

func (a Action) String() string {
	return [...]string{"none", "pruned", "compacted", "emergency"}[a]
}

// Decision is the outcome of a gate check.
type Decision struct {
	Action Action
	// TokensBefore and TokensAfter are calibrated estimates of the whole
	// request, overhead included.
	TokensBefore, TokensAfter int
	Budget                    int
	// Fits is false when even the emergency path left the request over
	// the budget, or compaction is disabled and the request is over.
	Fits bool
}

// Usage is the share of the budget the request would use.
func (d Decision) Usage() float64 { return float64(d.TokensAfter) / float64(d.Budget) }

// calibrated applies the engine's calibration factor.
func (e *Engine) calibrated(raw int) int {
	e.mu.Lock()
	n := e.calib.Apply(raw)
	e.mu.Unlock()
	return n
}

// EnsureFits is the gate: call it before every model call and after every
// batch of tool results. Below the prune threshold it only measures. Above
// it, old oversized tool results are shortened; above the compaction point
// the history is compacted, when what can be folded (not the pinned
// messages, not the kept tail) frees at least MinSavings of the request and
// no compaction that freed less is waiting for the session to grow; at the
// emergency threshold the newest messages are kept with a notice and no
// model is called, when that frees as much (over the budget, when it frees
// anything). An error means nothing in the session changed.
//
// Decision.Fits false means the request is still over the budget after
// all of that: the pinned messages and the newest ones alone do not fit.
// Sending it as it is will overflow; the caller must shorten what the
// session keeps or use a larger window.
func (e *Engine) EnsureFits(ctx context.Context, s *Session, req Request) (Decision, error) {
	s.mu.Lock()
	overhead := req.ToolSchemaTokens + req.DynamicTokens
	raw := s.contextTokens() + overhead
	s.lastEstimate, s.checked, s.lastOverhead = raw, true, overhead
	used := e.calibrated(raw)
	budget := int(e.budget.Load())
	if !s.forceCompact && float64(used) < e.cfg.pruneAt*float64(budget) && e.Policy().Due(used, req.CacheCold) == "" {
		s.mu.Unlock()
		return Decision{TokensBefore: used, TokensAfter: used, Budget: budget, Fits: true}, nil
	}
	s.mu.Unlock()
	return e.act(ctx, s, overhead, used, req)
}

// act is the gate above the prune threshold.
func (e *Engine) act(ctx context.Context, s *Session, overhead, before int, req Request) (Decision, error) {
	cold := req.CacheCold
	budget := float64(e.budget.Load())
	d := Decision{TokensBefore: before, Budget: int(budget)}
	measure := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return e.calibrated(s.contextTokens() + overhead)
	}
	s.mu.Lock()
	force := s.forceCompact
	s.mu.Unlock()

	if e.prune(s, e.cfg.ProtectRecentTokens) > 0 {
		d.Action = ActionPruned
	}
	used := measure()
	if !e.cfg.DisableCompaction && (force || e.Policy().Due(used, cold) != "") {
		keep := e.KeepRecent(s, req)
		switch {
		case float64(used) >= e.cfg.emergencyAt*budget:
			// Over the budget any gain counts; under it, dropping
			// messages is worth it only for MinSavings of the request.
			minFree := 1
			if !force && used <= int(budget) {
				minFree = int(e.cfg.MinSavings * float64(used))
			}
			_, err := e.emergency(s, used, overhead, minFree)
			if err != nil && !errors.Is(err, ErrNothingToFold) {
				return d, err
			}
			if err == nil {
				d.Action = ActionEmergency
			}
		case force || e.worthCompacting(s, used, overhead, keep):
			opts := compactOptions{overhead: overhead}
			if !force {
				opts.KeepRecentTokens = keep
			}
			res, err := e.compact(ctx, s, opts)
			if err != nil && !errors.Is(err, ErrNothingToFold) {
				return d, err
			}
			if err == nil {
				d.Action = ActionCompacted
				if res.Emergency {
					d.Action = ActionEmergency
				}
			}
		}
		used = measure()
		if float64(used) >= e.cfg.emergencyAt*budget {
			// Still over: drop the protection of recent tool results.
			if e.prune(s, 0) > 0 && d.Action < ActionPruned {
				d.Action = ActionPruned
			}
			used = measure()
		}
	}
	s.mu.Lock()
	s.forceCompact = false
	// The next usage report is for the context as it is now, not as it
	// was before the gate acted.
	s.lastEstimate = s.contextTokens() + overhead
	s.mu.Unlock()
	d.TokensAfter = used
	d.Fits = used <= d.Budget
	return d, nil
}

// ObserveUsage feeds a provider's usage report for the last call made after
// a gate check. Session.Append does this for assistant messages carrying
// Usage; call it directly when the reply is not appended.
func (e *Engine) ObserveUsage(s *Session, u Usage) {
	if err := checkUsage(&u); err != nil {
		e.log.Warn("usage report ignored", "session", s.ID(), "err", err)
		return
	}
	s.mu.Lock()
	est, ok := s.lastEstimate, s.checked
	s.checked = false
	s.mu.Unlock()
	reported := u.PromptTokens()
	if ok {
		e.mu.Lock()
		e.calib.Observe(est, reported)
		e.mu.Unlock()
	}
	if window := int(e.window.Load()); overflow.Silent(reported, window) {
		s.mu.Lock()
		s.forceCompact = true
		s.mu.Unlock()
		e.events.emit(&OverflowEvent{Session: s.ID(), Reason: fmt.Sprintf("reported input %d tokens exceeds the %d token window", reported, window), Silent: true})
	}
}

// AppendReply appends an assistant reply and feeds its Usage, if any, to
// calibration and silent-overflow detection.
func (e *Engine) AppendReply(s *Session, m Message) error {
	if err := s.Append(m); err != nil {
		return err
	}
	if m.Usage != nil {
		e.ObserveUsage(s, *m.Usage)
	}
	s.mu.Lock()
	s.overflowRetry = false
	s.mu.Unlock()
	return nil
}

// services is what plugins reach during a compaction. It counts the model
// usage of the calls they make.
type services struct {
	e     *Engine
	mu    sync.Mutex
	usage Usage
	model string
	// promptUsage and promptUSD are a PromptSummarizer's call, priced
	// apart: its model is the conversation's, not the strategies'.
	promptUsage Usage
	promptUSD   float64
}

// addCall counts a PromptSummarizer's call in the compaction's usage and
// cost.
func (sv *services) addCall(ps *PromptSummary) {
	usd := ps.CostUSD
	if usd == 0 {
		if m, ok := catalog.Lookup(ps.Model); ok {
			usd = cost.FromUsage(ps.Usage).USD(m.Prices())
		}
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.promptUsage = addUsage(sv.promptUsage, ps.Usage)
	sv.promptUSD += usd
}

// addUsage sums two usage reports.
func addUsage(a, b Usage) Usage {
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.CacheReadTokens += b.CacheReadTokens
	a.CacheWriteTokens += b.CacheWriteTokens
	return a
}

// allUsage is the usage of every model call of the compaction.
func (sv *services) allUsage() Usage {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return addUsage(sv.usage, sv.promptUsage)
}

func (sv *services) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	if sv.e.model == nil {
		return nil, abi.Errorf(abi.CodeNoModel, "no model is configured; run offline")
	}
	resp, err := sv.e.model.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	// A summary asked of the agent's own model is one more usage report
	// for its calibration: the request is counted the way the context is.
	if reported := resp.Usage.PromptTokens(); reported > 0 && sv.e.cfg.Model != "" && sv.e.model.Model() == sv.e.cfg.Model {
		est := sv.e.counter.Count(req.System)
		for i := range req.Messages {
			est += tokens.Message(sv.e.counter, &req.Messages[i])
		}
		sv.e.mu.Lock()
		sv.e.calib.Observe(est, reported)
		sv.e.mu.Unlock()
	}
	sv.mu.Lock()
	sv.usage = addUsage(sv.usage, resp.Usage)
	sv.model = resp.Model
	sv.mu.Unlock()
	return resp, nil
}

// MaxOutputTokens is the summarizing model's output limit from the
// catalog: a plugin's max_tokens is clamped to it (plugin.OutputLimiter),
// so no plugin asks the user's key for more than the model can write.
func (sv *services) MaxOutputTokens() int {
	if sv.e.model == nil {
		return 0
	}
	if m, ok := catalog.Lookup(sv.e.model.Model()); ok {
		return m.MaxOutput
	}
	return 0
}

func (sv *services) CountTokens(_ context.Context, text string) (int, error) {
	return sv.e.counter.Count(text), nil
}

// cost prices the usage with the catalog's figures for the model.
func (sv *services) cost() float64 {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	name := sv.model
	if name == "" && sv.e.model != nil {
		name = sv.e.model.Model()
	}
	m, ok := catalog.Lookup(name)
	if !ok {
		return sv.promptUSD
	}
	return sv.promptUSD + cost.FromUsage(sv.usage).USD(m.Prices())
}
