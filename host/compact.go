package host

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/tokens"
	"github.com/compact-host/compact-host/host/recall"
)

// Errors of compaction.
var (
	// ErrNothingToFold: the session has no history that can be folded
	// while keeping what must be kept, or folding it would not shrink the
	// context by what it must (the emergency path's floor).
	ErrNothingToFold = errors.New("host: nothing to fold")
	// ErrBreakerOpen: the strategy failed too often in a row and is
	// skipped until its cooldown ends.
	ErrBreakerOpen = errors.New("host: strategy circuit breaker is open")
	// ErrEmptySummary: a strategy returned no summary.
	ErrEmptySummary = errors.New("host: strategy returned an empty summary")
	// ErrConcurrentCompaction: the session was compacted or undone while
	// this compaction ran; its result was discarded.
	ErrConcurrentCompaction = errors.New("host: session changed during compaction")
	// ErrSummaryNotSmaller: a strategy's summary is not smaller than what
	// it replaces (the folded messages and the previous summary), so the
	// compaction would not shrink the context; the attempt failed.
	ErrSummaryNotSmaller = errors.New("host: summary is not smaller than what it replaces")
)

// StrategyEmergency names the emergency path in events and logs.
const StrategyEmergency = "emergency"

// CompactOptions tune a manual compaction.
type CompactOptions struct {
	// Focus is text from the user saying what the summary must keep.
	Focus string
	// Strategy overrides the configured strategy for this compaction.
	Strategy string
	// KeepRecentTokens overrides the configured amount kept verbatim.
	KeepRecentTokens int
	// Overhead is what every request adds beside the messages (an
	// agent's system prompt and tools, when the compaction goes back into
	// its file): the summary's default size is sized by the room it
	// leaves in the budget.
	Overhead int
	// RecallHint ends the summary with recall.Hint, telling the model
	// that it can expand the summary's markers: set it only when the
	// agent has the recall tools.
	RecallHint bool
}

type compactOptions struct {
	CompactOptions
	overhead int
	manual   bool
}

// Compact compacts the session now, whatever its size: the manual
// compaction of an agent's /compact command.
func (e *Engine) Compact(ctx context.Context, s *Session, opts CompactOptions) (Compaction, error) {
	return e.compact(ctx, s, compactOptions{CompactOptions: opts, manual: true, overhead: max(opts.Overhead, 0)})
}

// plan is a compaction worked out under the session lock, run without it.
type plan struct {
	start, cut, turn int
	// histEnd ends the history: the cut, or the start of the turn the cut
	// is inside; msgs[histEnd:cut] are the turn's prefix.
	histEnd int
	// prefixLen is how many messages of the turn's prefix are folded.
	prefixLen int
	// history and prefix are the folded messages as the view shows them;
	// collect fills them, for the strategies, after makePlan.
	history, prefix []Message
	previous        string
	// imported is the index+1 of a summary message the session was read
	// with (a file compacted before, by its agent or by us): its text is
	// merged as the previous summary rather than folded as a message. 0
	// when there is none.
	imported int
	files    abi.FileOps
	// markers name what the summary stands for: the folded span, its
	// large tool outputs, and what the previous summary named.
	markers       []abi.Marker
	latestRequest string // text of the latest request, when it is folded
	folded        int
	generation    int
	before        int
	// target is the summary size asked for (Config.summaryTarget).
	target int
	turnNo int
}

func (e *Engine) makePlan(s *Session, keep int) (*plan, error) {
	if err := s.refresh(); err != nil {
		return nil, err
	}
	p := &plan{start: s.viewStart, previous: s.previousSummary(), generation: len(s.compactions)}
	p.cut = s.findCut(p.start, keep, e.cfg.MinKeepMessages)
	if p.cut <= p.start {
		return nil, ErrNothingToFold
	}
	if p.previous == "" {
		if i := s.leadingSummary(p.start, p.cut); i >= 0 {
			p.previous, p.imported = textOf(s.msgs[i].msg), i+1
		}
	}
	p.turn = s.turnStart(p.cut)
	p.histEnd = p.cut
	if p.turn > p.start && p.turn < p.cut {
		p.histEnd = p.turn
	}
	// Counted from the pinned index, not message by message: planning
	// costs the same at 100 messages and at 100,000.
	p.prefixLen = p.cut - p.histEnd - s.pinnedIn(p.histEnd, p.cut)
	p.folded = p.cut - p.start - s.pinnedIn(p.start, p.cut)
	if p.folded == 0 {
		return nil, ErrNothingToFold
	}
	p.files = s.fileOpsBefore(p.cut)
	p.latestRequest = s.foldedRequest(p.cut)
	p.turnNo = len(s.requests)
	return p, nil
}

// markers are the markers of a compaction folding msgs[start:cut] after
// previous: the span and its large tool outputs, keyed by the
// conversation's first message, then the markers previous carries, so
// that a merge keeps them. Callers hold s.mu.
func (s *Session) markers(start, cut int, previous string) []abi.Marker {
	var folded []Message
	for i := start; i < cut; i++ {
		if m := s.msgs[i].msg; !m.Pinned && !m.Summary {
			folded = append(folded, m)
		}
	}
	var out []abi.Marker
	if len(folded) > 0 {
		all := make([]Message, 0, 4)
		for i := 0; i < len(s.msgs) && len(all) < 4; i++ {
			all = append(all, s.msgs[i].msg)
		}
		if key, ok := recall.KeyFor(all); ok {
			out = key.Markers(folded)
		}
	}
	return append(out, recall.Carried(previous)...)
}

// collect copies the folded messages, as the view shows them, into the
// plan: the strategies read them after the session lock is released, while
// prunes may change the view. The markers are made here too, not in the
// plan: a plan that only estimates (inspect, the gate) would otherwise pay
// for a walk of every folded block. Callers hold s.mu.
func (p *plan) collect(s *Session) {
	p.markers = s.markers(p.start, p.cut, p.previous)
	p.history, p.prefix = nil, nil
	if n := p.folded - p.prefixLen; n > 0 {
		p.history = make([]Message, 0, n)
	}
	if p.prefixLen > 0 {
		p.prefix = make([]Message, 0, p.prefixLen)
	}
	for i := p.start; i < p.cut; i++ {
		if s.msgs[i].msg.Pinned || i+1 == p.imported {
			continue
		}
		if i < p.histEnd {
			p.history = append(p.history, s.viewOf(i))
		} else {
			p.prefix = append(p.prefix, s.viewOf(i))
		}
	}
}

// pinnedIn is the number of pinned messages in msgs[from:to].
func (s *Session) pinnedIn(from, to int) int {
	return sort.SearchInts(s.pinned, to) - sort.SearchInts(s.pinned, from)
}

// keepFor is how much of the newest history a compaction keeps verbatim:
// the override when set, else KeepRecentTokens.
func (e *Engine) keepFor(override int) int {
	keep := e.cfg.KeepRecentTokens
	if override > 0 {
		keep = override
	}
	// A window adopted from an overflow error may be far smaller than the
	// one the keep figure was chosen for.
	if b := int(e.budget.Load()); b < e.cfg.budget {
		keep = min(keep, b/2)
	}
	return keep
}

// foldableTokens is the raw estimate of what folding msgs[start:cut]
// removes from the context: pinned messages stay in it.
func (s *Session) foldableTokens(start, cut int) int {
	t := s.cum[cut] - s.cum[start]
	for _, pi := range s.pinned[sort.SearchInts(s.pinned, start):sort.SearchInts(s.pinned, cut)] {
		t -= s.msgs[pi].tokens
	}
	return t
}

// summaryTokens estimates the summary the view shows: its prefix less the
// pinned messages in it.
func (s *Session) summaryTokens() int {
	if len(s.active) == 0 {
		return 0
	}
	t := s.viewPrefixTokens
	for _, pi := range s.pinned[:sort.SearchInts(s.pinned, s.viewStart)] {
		t -= s.msgs[pi].tokens
	}
	return max(t, 0)
}

// contextAfter is the raw estimate of the context once c folds
// msgs[:cut], without the request's overhead.
func (s *Session) contextAfter(cut int, c Compaction) int {
	prefix := s.prefixFor(cut, c)
	after := s.cum[len(s.msgs)] - s.cum[cut]
	for i := range prefix {
		after += tokens.Message(s.counter, &prefix[i])
	}
	return after
}

// worthCompacting reports whether the gate should compact s now, its
// request estimated at used (calibrated) with overhead: unless a
// compaction that freed little is waiting for the session to grow, what a
// compaction would fold (the history before the kept tail, pinned
// messages aside), less what its summary is expected to add over the
// previous one (the target size, the latest request), must be at least
// MinSavings of the request. Compacting for less would leave the context
// where it was, and the next check would compact again.
func (e *Engine) worthCompacting(s *Session, used, overhead, keep int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.backoffUntil > 0 && s.cum[len(s.msgs)] < s.backoffUntil {
		return false
	}
	cut := s.findCut(s.viewStart, e.keepFor(keep), e.cfg.MinKeepMessages)
	if cut <= s.viewStart {
		return false
	}
	// The summary takes the previous one's place, at its target size or
	// more, and carries the latest request when that is folded.
	fold := s.foldableTokens(s.viewStart, cut)
	gain := fold - max(0, e.cfg.summaryTarget(int(e.budget.Load())-overhead, fold)-s.summaryTokens())
	if k := len(s.requests); k > 0 && s.requests[k-1] >= s.viewStart && s.requests[k-1] < cut {
		gain -= min(s.msgs[s.requests[k-1]].tokens, maxAddedRequest/4)
	}
	freed := used - e.calibrated(s.contextTokens()+overhead-gain)
	return freed > 0 && float64(freed) >= e.cfg.MinSavings*float64(used)
}

func (e *Engine) compact(ctx context.Context, s *Session, opts compactOptions) (Compaction, error) {
	began := time.Now()
	s.mu.Lock()
	p, err := e.makePlan(s, e.keepFor(opts.KeepRecentTokens))
	var firstKept Message
	if err == nil {
		p.collect(s)
		p.before = e.calibrated(s.contextTokens() + opts.overhead)
		p.target = e.cfg.summaryTarget(int(e.budget.Load())-opts.overhead, s.foldableTokens(p.start, p.cut))
		if p.cut < len(s.msgs) {
			firstKept = s.msgs[p.cut].msg
		}
	}
	s.mu.Unlock()
	if err != nil {
		return Compaction{}, err
	}

	svc := &services{e: e}
	names := e.chain(opts.Strategy)
	var (
		summary  string
		strategy string
		offline  bool
	)
	if e.promptSummarizer != nil && opts.Strategy == "" {
		summary, err = e.promptSummary(ctx, s, svc, p, firstKept, opts)
		switch {
		case err == nil:
			strategy = StrategyCachedPrompt
		case errors.Is(err, errNoPromptSummary):
		case ctx.Err() != nil:
			return Compaction{}, fmt.Errorf("host: compaction cancelled: %w", ctx.Err())
		default:
			e.log.Warn("cached-prompt summary failed; falling back", "session", s.id, "next", names[0], "err", err)
			e.events.emit(&FallbackEvent{Session: s.id, From: StrategyCachedPrompt, To: names[0], Err: err})
		}
	}
	for i, name := range names {
		if strategy != "" {
			break
		}
		summary, offline, err = e.summarizePlan(ctx, s, svc, name, p, opts.Focus)
		if err == nil {
			summary = e.verifySummary(summary, p)
			if opts.RecallHint || e.cfg.RecallHint {
				summary = recall.WithHint(summary)
			}
			err = e.checkShrinks(name, summary, p)
		}
		if err == nil {
			strategy = name
			break
		}
		if ctx.Err() != nil {
			return Compaction{}, fmt.Errorf("host: compaction cancelled: %w", ctx.Err())
		}
		next := StrategyEmergency
		if i+1 < len(names) {
			next = names[i+1]
		}
		e.log.Warn("strategy failed; falling back", "session", s.id, "strategy", name, "next", next, "err", err)
		e.events.emit(&FallbackEvent{Session: s.id, From: name, To: next, Err: err})
	}
	if strategy == "" {
		c, emErr := e.emergency(s, p.before, opts.overhead, 1)
		if errors.Is(emErr, ErrNothingToFold) {
			// Nothing was spliced: the caller learns why the strategies
			// failed and why the emergency path could not stand in.
			return Compaction{}, fmt.Errorf("%w; %w", err, emErr)
		}
		return c, emErr
	}

	c := Compaction{
		Summary: summary, Strategy: strategy, Offline: offline, Focus: opts.Focus,
		TokensBefore: p.before, MessagesFolded: p.folded, Time: time.Now().UTC(),
	}
	if err := e.splice(s, p, &c, opts.overhead); err != nil {
		return Compaction{}, err
	}
	e.events.emit(&CompactionEvent{
		Session: s.id, CompactionID: c.ID, Strategy: strategy, Offline: offline, Manual: opts.manual,
		TokensBefore: c.TokensBefore, TokensAfter: c.TokensAfter, MessagesFolded: c.MessagesFolded,
		Turn: p.turnNo, Duration: time.Since(began), ModelUsage: svc.allUsage(), CostUSD: svc.cost(),
	})
	return c, nil
}

// chain is the strategy order for one compaction: the chosen strategy,
// then the fallbacks, without repeats.
func (e *Engine) chain(override string) []string {
	first := e.cfg.Strategy
	if override != "" {
		first = override
	}
	names := []string{first}
	for _, f := range e.cfg.Fallbacks {
		dup := false
		for _, n := range names {
			dup = dup || n == f
		}
		if !dup && f != "" {
			names = append(names, f)
		}
	}
	return names
}

func (e *Engine) strategy(name string) (Strategy, error) {
	if s, ok := e.local[name]; ok {
		return s, nil
	}
	if e.resolve != nil {
		return e.resolve(name)
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownStrategy, name)
}

// summarizePlan runs one strategy over the plan: the history (chunked to
// fit the summarizer's window) and, when the cut is inside a turn, the
// turn's prefix as its own request, merging the history's summary.
func (e *Engine) summarizePlan(ctx context.Context, s *Session, svc *services, name string, p *plan, focus string) (string, bool, error) {
	br := e.breaker(name)
	if !br.allow(time.Now()) {
		return "", false, fmt.Errorf("%w: %s", ErrBreakerOpen, name)
	}
	strat, err := e.strategy(name)
	if err != nil {
		br.record(err, time.Now(), e.cfg.BreakerFailures, e.cfg.BreakerCooldown)
		return "", false, err
	}
	offline := e.model == nil
	call := func(kind string, msgs []Message, previous string, target int) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, e.cfg.StrategyTimeout)
		defer cancel()
		resp, err := strat.Summarize(cctx, svc, &abi.SummarizeRequest{
			Kind: kind, Messages: msgs, PreviousSummary: previous, FileOps: p.files,
			TargetTokens: target, Focus: focus, ModelAvailable: e.model != nil, Markers: p.markers,
		})
		if err != nil {
			return "", fmt.Errorf("strategy %s: %w", name, err)
		}
		if strings.TrimSpace(resp.Summary) == "" {
			return "", fmt.Errorf("strategy %s: %w", name, ErrEmptySummary)
		}
		offline = offline || resp.Offline
		return resp.Summary, nil
	}

	summary := p.previous
	if len(p.history) > 0 {
		for _, chunk := range e.fitChunks(p.history, p.previous) {
			if summary, err = call(abi.FoldHistory, chunk, summary, p.target); err != nil {
				break
			}
		}
	}
	// The turn in progress is summarized last, with the history's summary
	// to merge: its request is the one in progress, so it heads the one
	// summary, and the history's latest request, done, becomes earlier.
	if err == nil && len(p.prefix) > 0 {
		for _, chunk := range e.fitChunks(p.prefix, summary) {
			if summary, err = call(abi.FoldTurnPrefix, chunk, summary, p.target); err != nil {
				break
			}
		}
	}
	br.record(err, time.Now(), e.cfg.BreakerFailures, e.cfg.BreakerCooldown)
	return summary, offline, err
}

// summarizerOverhead is room for the strategy's own instructions.
const summarizerOverhead = 2000

// fitChunks returns msgs in pieces that each fit the summarizer's window
// with room for the previous summary and the reply: tool results are
// shortened first, and what still does not fit is split.
func (e *Engine) fitChunks(msgs []Message, previous string) [][]Message {
	avail := e.summarizerBudget() - e.cfg.SummaryTokens - summarizerOverhead - e.counter.Count(previous)
	avail = max(avail, 1000)
	total := 0
	for i := range msgs {
		total += tokens.Message(e.counter, &msgs[i])
	}
	if total <= avail {
		return [][]Message{msgs}
	}
	short := make([]Message, len(msgs))
	for i, m := range msgs {
		m.Content = append([]Block(nil), m.Content...)
		for bi := range m.Content {
			if m.Content[bi].Type == abi.BlockToolResult {
				m.Content[bi].Text = headTail(m.Content[bi].Text, e.cfg.PruneKeepTokens*4)
			}
		}
		short[i] = m
	}
	var chunks [][]Message
	var cur []Message
	size := 0
	for i := range short {
		t := tokens.Message(e.counter, &short[i])
		if len(cur) > 0 && size+t > avail {
			chunks = append(chunks, cur)
			cur, size = nil, 0
		}
		cur = append(cur, short[i])
		size += t
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

// summarizerBudget is the configured summarizer budget, or the engine's
// current budget when none was set.
func (e *Engine) summarizerBudget() int {
	if e.cfg.summarizerSet {
		return e.cfg.SummarizerBudget
	}
	return int(e.budget.Load())
}

// verifySummary makes sure the summary names the latest folded request and
// every file read or modified up to the cut, appending what is missing,
// and trims a summary far over its target.
func (e *Engine) verifySummary(summary string, p *plan) string {
	limit := e.cfg.SummaryTokens * 2
	if e.counter.Count(summary) > limit {
		summary = headTail(summary, limit*4)
	}
	var add strings.Builder
	if p.latestRequest != "" && !mentions(summary, p.latestRequest) {
		add.WriteString("\n\n## Latest User Request (verbatim)\n" + clipRequest(p.latestRequest, maxAddedRequest))
	}
	var missingMod, missingRead []string
	for _, f := range p.files.Modified {
		if !strings.Contains(summary, f) {
			missingMod = append(missingMod, f)
		}
	}
	for _, f := range p.files.Read {
		if !strings.Contains(summary, f) {
			missingRead = append(missingRead, f)
		}
	}
	if len(missingMod) > 0 {
		add.WriteString("\n\n## Modified Files\n")
		for _, f := range missingMod {
			add.WriteString("- " + f + "\n")
		}
	}
	if len(missingRead) > 0 {
		const maxListed = 200
		add.WriteString("\n\n## Files Read\n")
		for i, f := range missingRead {
			if i == maxListed {
				add.WriteString("- … and " + strconv.Itoa(len(missingRead)-maxListed) + " more\n")
				break
			}
			add.WriteString("- " + f + "\n")
		}
	}
	return abi.AppendMarkers(strings.TrimRight(summary+add.String(), "\n"), p.markers)
}

// checkShrinks fails a summary that is not smaller than what it replaces:
// the folded messages and the previous summary. Splicing it would make
// the context bigger (an offline summary of a short span can be), so the
// attempt counts as failed and the next strategy is tried.
func (e *Engine) checkShrinks(strategy, summary string, p *plan) error {
	replaced := e.counter.Count(p.previous)
	for _, msgs := range [][]Message{p.history, p.prefix} {
		for i := range msgs {
			replaced += tokens.Message(e.counter, &msgs[i])
		}
	}
	if n := e.counter.Count(summary); n >= replaced {
		return fmt.Errorf("strategy %s: %w: %d tokens for %d replaced", strategy, ErrSummaryNotSmaller, n, replaced)
	}
	return nil
}

// maxAddedRequest bounds the request verifySummary adds to a summary
// that lacks it.
const maxAddedRequest = 8000

// clipRequest keeps the head and tail of a request longer than max bytes,
// saying how much of the request it left out.
func clipRequest(req string, max int) string {
	if len(req) <= max {
		return req
	}
	head := req[:utf8Floor(req, max*3/5)]
	tail := req[utf8Ceil(req, len(req)-(max-len(head))):]
	omitted := req[len(head) : len(req)-len(tail)]
	return fmt.Sprintf("%s\n[... %d lines (%d bytes) of the request left out; the whole request is in the session log ...]\n%s",
		head, strings.Count(omitted, "\n"), len(omitted), tail)
}

// mentions reports whether summary carries the request: its opening words,
// whitespace folded, the summary's block-quote markers ignored (a summary
// quotes the request).
func mentions(summary, request string) bool {
	fold := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	lines := strings.Split(summary, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimPrefix(l, ">"), " ")
	}
	summary = strings.Join(lines, "\n")
	req := fold(request)
	if len(req) > 200 {
		req = req[:utf8Floor(req, 200)]
	}
	return strings.Contains(fold(summary), req)
}

// splice logs the compaction and makes it active, unless the session was
// compacted or undone meanwhile.
func (e *Engine) splice(s *Session, p *plan, c *Compaction, overhead int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Under the log's lock, the compaction is checked against the log as
	// it is now, with what other writers appended replayed.
	if err := s.lockLog(); err != nil {
		return fmt.Errorf("host: compaction not saved, session unchanged: %w", err)
	}
	defer s.unlockLog()
	if len(s.compactions) != p.generation || s.viewStart != p.start {
		return s.conflict()
	}
	c.ID = "c" + strconv.Itoa(len(s.compactions)+1)
	c.FoldedThrough = s.msgs[p.cut-1].msg.ID
	// Tokens after, computed before the log write so the entry holds it.
	c.TokensAfter = e.calibrated(s.contextAfter(p.cut, *c) + overhead)
	if s.log != nil {
		if err := s.writeEntry(Entry{Type: EntryCompaction, Compaction: c}); err != nil {
			return fmt.Errorf("host: compaction not saved, session unchanged: %w", err)
		}
	}
	if err := s.applyCompaction(*c); err != nil {
		return err
	}
	s.backoffUntil = 0
	if float64(c.TokensBefore-c.TokensAfter) < e.cfg.MinSavings*float64(c.TokensBefore) {
		// Freed too little: the gate compacts again only once the session
		// has grown by MinSavings of the budget.
		s.backoffUntil = s.cum[len(s.msgs)] + max(1, int(e.cfg.MinSavings*float64(e.budget.Load())))
	}
	return nil
}

// emergency keeps the newest messages and drops the rest with a notice,
// the previous summary, the latest request and the file lists. No model is
// called. It keeps EmergencyKeepMessages, or fewer (never under
// MinKeepMessages) while what it keeps would leave the context at the
// compaction point, where the next check would take this path again. It
// drops nothing unless that frees at least minFree calibrated tokens (and
// always at least one): a cut that folds only pinned messages, or a notice
// no smaller than what it drops, returns ErrNothingToFold with the
// session as it was. Otherwise it fails only if the log cannot be written.
func (e *Engine) emergency(s *Session, before, overhead, minFree int) (Compaction, error) {
	began := time.Now()
	s.mu.Lock()
	if err := s.refresh(); err != nil {
		s.mu.Unlock()
		return Compaction{}, err
	}
	p := &plan{start: s.viewStart, previous: s.previousSummary(), generation: len(s.compactions), before: before}
	p.cut = e.emergencyCut(s, p.start, overhead)
	if p.cut < 0 {
		s.mu.Unlock()
		return Compaction{}, fmt.Errorf("%w: the emergency path has no message to drop that is not pinned or kept", ErrNothingToFold)
	}
	if text := s.latestSummaryText(p.start, p.cut); text != "" {
		// A summary among the dropped messages (the agent's, or ours
		// written into its file) is newer than any compaction before
		// them: it stands for everything before it.
		p.previous = text
	}
	p.folded = p.cut - p.start - s.pinnedIn(p.start, p.cut)
	p.files = s.fileOpsBefore(p.cut)
	p.latestRequest = s.foldedRequest(p.cut)
	p.turnNo = len(s.requests)
	p.markers = s.markers(p.start, p.cut, p.previous)

	summary := "The earlier conversation was dropped to keep the session within its context window."
	if p.previous != "" {
		summary = p.previous + "\n\n" + summary
	}
	summary = e.verifySummary(summary, p)
	if e.cfg.RecallHint {
		summary = recall.WithHint(summary)
	}
	c := Compaction{Summary: summary, Strategy: StrategyEmergency, Emergency: true, Offline: true,
		TokensBefore: before, MessagesFolded: p.folded, Time: time.Now().UTC()}
	now := e.calibrated(s.contextTokens() + overhead)
	after := e.calibrated(s.contextAfter(p.cut, c) + overhead)
	s.mu.Unlock()
	if freed := now - after; freed <= 0 {
		return Compaction{}, fmt.Errorf("%w: the emergency path would not shrink the context (%d to %d tokens)", ErrNothingToFold, now, after)
	} else if freed < minFree {
		return Compaction{}, fmt.Errorf("%w: the emergency path would free %d tokens, under the %d that matter", ErrNothingToFold, freed, minFree)
	}
	if err := e.splice(s, p, &c, overhead); err != nil {
		return Compaction{}, err
	}
	e.events.emit(&CompactionEvent{Session: s.id, CompactionID: c.ID, Strategy: StrategyEmergency, Emergency: true, Offline: true,
		TokensBefore: c.TokensBefore, TokensAfter: c.TokensAfter, MessagesFolded: c.MessagesFolded, Turn: p.turnNo, Duration: time.Since(began)})
	return c, nil
}

// compactedHeadPrefix opens the summary message a compaction puts in the
// context (summaryMessage), as it reads once written into an agent's file.
const compactedHeadPrefix = "[Context compacted"

// latestSummaryText is the text of the newest summary message in
// msgs[start:cut]: one marked Summary, an agent's continuation summary
// (abi.IsSummaryText), or a compaction's summary message as written into
// an agent's file, less its head line. "" when there is none. Callers
// hold s.mu.
func (s *Session) latestSummaryText(start, cut int) string {
	for i := cut - 1; i >= start; i-- {
		m := &s.msgs[i].msg
		if m.Role != abi.RoleUser || m.Pinned {
			continue
		}
		text := strings.TrimSpace(m.Text())
		switch {
		case strings.HasPrefix(text, compactedHeadPrefix):
			if _, rest, ok := strings.Cut(text, "]\n\n"); ok {
				text = rest
			}
			return text
		case m.Summary || abi.IsSummaryText(text):
			return text
		}
	}
	return ""
}

// emergencyCut is where the emergency path cuts: the valid cut nearest to
// keeping the newest EmergencyKeepMessages (later first, then earlier)
// that folds a message not pinned, moved later while the context left
// would still be at the compaction point, as long as MinKeepMessages stay.
// It is -1 when no cut folds anything. Callers hold s.mu.
func (e *Engine) emergencyCut(s *Session, start, overhead int) int {
	n := len(s.msgs)
	folds := func(j int) bool { return s.cutAt(j) && j-start > s.pinnedIn(start, j) }
	from := max(n-e.cfg.EmergencyKeepMessages, start+1)
	cut := -1
	for j := from; j <= n && cut < 0; j++ {
		if folds(j) {
			cut = j
		}
	}
	for j := from - 1; j > start && cut < 0; j-- {
		if folds(j) {
			cut = j
		}
	}
	if cut < 0 {
		return -1
	}
	goal := e.cfg.compactAt * float64(e.budget.Load())
	raw := s.contextTokens() + overhead
	for j := cut + 1; j <= n-e.cfg.MinKeepMessages && float64(e.calibrated(raw-s.foldableTokens(start, cut))) >= goal; j++ {
		if s.cutAt(j) {
			cut = j
		}
	}
	return cut
}

// fileOpsBefore is the cumulative file operations of msgs[:cut].
func (s *Session) fileOpsBefore(cut int) abi.FileOps {
	if cut >= len(s.msgs) {
		return s.files.snapshot()
	}
	return s.files.before(s.msgs[cut].fileSeq + 1)
}

// breaker counts a strategy's consecutive failures.
type breaker struct {
	mu        sync.Mutex
	failures  int
	openUntil time.Time
}

func (e *Engine) breaker(name string) *breaker {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.breakers[name]
	if b == nil {
		b = &breaker{}
		e.breakers[name] = b
	}
	return b
}

// allow is false while the breaker is open. After the cooldown one call
// is let through; its outcome closes or reopens the breaker.
func (b *breaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.After(b.openUntil) || now.Equal(b.openUntil)
}

func (b *breaker) record(err error, now time.Time, threshold int, cooldown time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		b.failures = 0
		b.openUntil = time.Time{}
		return
	}
	b.failures++
	if b.failures >= threshold {
		b.openUntil = now.Add(cooldown)
	}
}

// leadingSummary is the index of the summary message that opens the
// unpinned messages of msgs[start:cut], or -1: a session read from a file
// compacted before starts from that compaction's summary.
func (s *Session) leadingSummary(start, cut int) int {
	for i := start; i < cut; i++ {
		m := &s.msgs[i].msg
		switch {
		case m.Pinned:
			continue
		case m.Summary && m.Role == abi.RoleUser:
			return i
		}
		return -1
	}
	return -1
}

// textOf is the text of m's text blocks.
func textOf(m Message) string {
	var b strings.Builder
	for _, blk := range m.Content {
		if blk.Type == abi.BlockText {
			b.WriteString(blk.Text)
		}
	}
	return b.String()
}
