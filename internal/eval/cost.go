package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/host/formats"
)

// The policies eval --cost compares.
const (
	// PolicyAgent is the conversation as the agent ran it, compactions
	// and all, replayed with the cache model.
	PolicyAgent = "agent"
	// PolicyNone compacts only a prompt that would overflow the budget.
	PolicyNone = "none"
	// PolicyThreshold compacts past the gate's compact share.
	PolicyThreshold = "threshold"
	// PolicyCacheAware compacts past CostOptions.ColdShare once the
	// cache has expired, and a warm cache only past cost.WarmShare of
	// the gate's shares; each compaction keeps what cost.Fold chooses.
	PolicyCacheAware = "cache-aware"
)

// Policies are the policy names, in the order reported.
var Policies = []string{PolicyAgent, PolicyNone, PolicyThreshold, PolicyCacheAware}

// maxCostFileBytes bounds a session file eval --cost reads.
const maxCostFileBytes = 1 << 30

// CostOptions say what eval --cost replays.
type CostOptions struct {
	// Sessions are Claude Code or Codex files; default every file of the
	// shared corpus. Files that record no usage are listed as skipped.
	Sessions []string
	// Policies to compare; default all of Policies.
	Policies []string
	// Window is the context window in tokens; 0 is the model's own.
	Window int
	// MaxOutputTokens is the reply reserve out of the window, as the
	// agent asked for it; 0 is the model's output limit.
	MaxOutputTokens int
	// Prices, when known, replace the catalog's for every session.
	Prices cost.Prices
	// TTL is the cache's lifetime; 0 is the one of each session's latest
	// cache write, else 5 minutes.
	TTL time.Duration
	// ColdShare is the cache-aware policy's share of the budget past
	// which an expired cache is compacted; default 0.5.
	ColdShare float64
	// CompactionModel is the model fresh summary calls are billed at;
	// default catalog.SummaryModel of each session's model, the one the
	// proxy asks by default. A summary call that resends the cached
	// prompt is billed at the session's own model.
	CompactionModel string
	// Probes, when set, is a probe file or a directory of them: each
	// session with a probe set is also replayed through the engine under
	// each policy but agent, with the offline structured strategy, and its
	// probes scored on what the policy leaves at each point.
	Probes string
}

// CostReport is what eval --cost measured.
type CostReport struct {
	Sessions []CostSession `json:"sessions"`
	// Totals sum every session's outcome by policy, in Policies' order.
	Totals []PolicyCost `json:"totals"`
	// Skipped are the files not replayed, and why.
	Skipped []string `json:"skipped,omitempty"`
}

// CostSession is one session's replay under every policy.
type CostSession struct {
	Session  string `json:"session"`
	Model    string `json:"model"`
	Calls    int    `json:"calls"`
	Budget   int    `json:"budget"`
	CacheTTL string `json:"cache_ttl"`
	// CompactionModel is the model fresh summary calls are billed at.
	CompactionModel string `json:"compaction_model"`
	// HeadTokens is the start of the prompt the agent's own compactions
	// left cached (its recorded cache reads right after one); 0 when it
	// made none. Every policy's compactions keep it cached.
	HeadTokens int `json:"head_tokens"`
	// BilledUSD is what the recorded usage was billed, the reference the
	// replays are measured against.
	BilledUSD float64      `json:"billed_usd"`
	Policies  []PolicyCost `json:"policies"`

	// window is the context window replayed at; billed is the recorded
	// usage call by call, in the order of Policies' steps.
	window int
	billed []cost.Step
}

// PolicyCost is the outcome of one policy.
type PolicyCost struct {
	Policy string `json:"policy"`
	cost.Outcome
	// Probe is the policy's probe score, with CostOptions.Probes, on the
	// sessions that have a probe set.
	Probe *PolicyProbes `json:"probe,omitempty"`
}

// RunCost replays each session's recorded calls, with their times and
// usage, under each policy.
func RunCost(opts CostOptions) (*CostReport, error) {
	if opts.ColdShare == 0 {
		opts.ColdShare = 0.5
	}
	if !(opts.ColdShare > 0 && opts.ColdShare <= 1) {
		return nil, fmt.Errorf("eval: cold share %g: want a share above 0, at most 1", opts.ColdShare)
	}
	if len(opts.Policies) == 0 {
		opts.Policies = Policies
	}
	for _, p := range opts.Policies {
		if !contains(Policies, p) {
			return nil, fmt.Errorf("eval: policy %q: want one of %v", p, Policies)
		}
	}
	paths, named := opts.Sessions, len(opts.Sessions) > 0
	if !named {
		dir, err := CorpusDir()
		if err != nil {
			return nil, err
		}
		if paths, err = CorpusSessions(dir); err != nil {
			return nil, err
		}
	}
	rep := &CostReport{}
	totals := map[string]*PolicyCost{}
	var pr *prober
	if opts.Probes != "" {
		var err error
		if pr, err = newProber(opts.Probes); err != nil {
			return nil, err
		}
		defer pr.close()
	}
	for _, path := range paths {
		cs, skip, err := costSession(path, opts, pr)
		if err != nil {
			if named {
				return nil, &SessionError{Path: path, Err: err}
			}
			skip = err.Error()
		}
		if skip != "" {
			rep.Skipped = append(rep.Skipped, filepath.Base(path)+": "+skip)
			continue
		}
		rep.Sessions = append(rep.Sessions, *cs)
		for _, pc := range cs.Policies {
			t := totals[pc.Policy]
			if t == nil {
				t = &PolicyCost{Policy: pc.Policy}
				totals[pc.Policy] = t
			}
			addOutcome(t, pc)
		}
	}
	if len(rep.Sessions) == 0 {
		return rep, fmt.Errorf("%w: none records usage (%d skipped)", ErrNoSessions, len(rep.Skipped))
	}
	for _, p := range opts.Policies {
		rep.Totals = append(rep.Totals, *totals[p])
	}
	return rep, nil
}

func addBill(to *cost.Bill, b cost.Bill) {
	to.Requests += b.Requests
	to.Input += b.Input
	to.CacheRead += b.CacheRead
	to.CacheWrite5m += b.CacheWrite5m
	to.CacheWrite1h += b.CacheWrite1h
	to.Output += b.Output
	to.USD += b.USD
}

// costSession replays one file; skip says why a file is not replayed.
func costSession(path string, opts CostOptions, pr *prober) (cs *CostSession, skip string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, "", err
	}
	if !st.Mode().IsRegular() || st.Size() > maxCostFileBytes {
		return nil, fmt.Sprintf("not a regular file of at most %d MiB", maxCostFileBytes>>20), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	format, err := formats.Detect(data[:min(len(data), 1<<20)])
	if err != nil {
		return nil, "", err
	}
	reqs, err := formats.BilledRequests(bytes.NewReader(data), format)
	if err != nil && !errors.Is(err, formats.ErrTornLine) {
		return nil, "", err
	}
	if len(reqs) == 0 {
		return nil, format + " file records no usage", nil
	}
	model := reqs[len(reqs)-1].Model
	m, known := catalog.Lookup(model)
	prices := opts.Prices
	if !prices.Known() {
		if !known || m.InputPrice == 0 {
			return nil, fmt.Sprintf("no prices for model %q (give --price)", model), nil
		}
		prices = m.Prices()
	}
	eng, err := host.New(host.Config{Model: model, ContextWindow: opts.Window, MaxOutputTokens: opts.MaxOutputTokens})
	if err != nil {
		return nil, "", err
	}
	b := eng.Budget()
	ttl := opts.TTL
	if ttl == 0 {
		ttl = latestTTL(reqs)
	}
	cs = &CostSession{Session: filepath.Base(path), Model: model, Calls: len(reqs), Budget: b.Input,
		CacheTTL: map[bool]string{true: "1h", false: "5m"}[ttl >= cost.TTL1h], BilledUSD: cost.BillRequests(prices, reqs).USD, window: b.ContextWindow}
	summaryPrices := prices
	cs.CompactionModel = opts.CompactionModel
	if cs.CompactionModel == "" && known {
		cs.CompactionModel = catalog.SummaryModel(m)
	}
	if sm, ok := catalog.Lookup(cs.CompactionModel); ok && cs.CompactionModel != model && sm.InputPrice > 0 {
		summaryPrices = sm.Prices()
	} else {
		cs.CompactionModel = model
	}
	// Each conversation of the file (the main one and every sub-agent's)
	// has its own prompt and cache, and is replayed on its own.
	var threads [][]cost.Call
	var billed [][]cost.Step
	for _, rs := range splitThreads(reqs) {
		threads = append(threads, cost.CallsOf(rs))
		var steps []cost.Step
		for _, r := range rs {
			steps = append(steps, cost.Step{Time: r.Time, USD: r.USD(prices)})
		}
		billed = append(billed, steps)
	}
	cs.billed = mergeSteps(billed)
	for _, calls := range threads {
		cs.HeadTokens = max(cs.HeadTokens, head(calls))
	}
	for _, name := range opts.Policies {
		total := PolicyCost{Policy: name}
		var steps [][]cost.Step
		for _, calls := range threads {
			pc, err := replayPolicy(name, calls, prices, summaryPrices, ttl, b, cs.HeadTokens, opts.ColdShare)
			if err != nil {
				return nil, "", err
			}
			addOutcome(&total, pc)
			steps = append(steps, pc.Steps)
		}
		total.Steps = mergeSteps(steps)
		cs.Policies = append(cs.Policies, total)
	}
	if pr != nil {
		if err := pr.score(cs, path, reqs, model, b.ContextWindow, opts, ttl); err != nil {
			return nil, "", err
		}
	}
	return cs, "", nil
}

// splitThreads groups requests by conversation, in the order each
// conversation began.
func splitThreads(reqs []cost.Request) [][]cost.Request {
	var out [][]cost.Request
	at := map[string]int{}
	for _, r := range reqs {
		i, ok := at[r.Thread]
		if !ok {
			i = len(out)
			at[r.Thread] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// replayPolicy is one conversation's calls under the policy name, at
// budget b, with a head of the prompt that compactions leave cached;
// fresh summary calls are billed at summaryPrices.
func replayPolicy(name string, calls []cost.Call, prices, summaryPrices cost.Prices, ttl time.Duration, b host.Budget, head int, coldShare float64) (PolicyCost, error) {
	pc := PolicyCost{Policy: name}
	if name == PolicyAgent {
		// cost.Replay a call at a time, for each call's cost.
		rp := cost.Replayer{TTL: ttl}
		for _, c := range calls {
			r := rp.Send(c)
			pc.Calls.Add(prices, r)
			pc.Steps = append(pc.Steps, cost.Step{Time: c.Time, USD: r.USD(prices), Compacted: c.Rewritten})
			pc.PromptTokens += c.PromptTokens
			if c.Rewritten {
				pc.Compactions++
			}
		}
		pc.USD = pc.Calls.USD
		return pc, nil
	}
	// A compaction leaves what the first call sent (the agent's system
	// prompt, tools and first request), the recent history kept verbatim
	// and the summary.
	first := min(calls[0].PromptTokens, b.Input/2)
	kept := min(first+b.KeepRecentTokens+b.SummaryTokens, b.Input-1)
	// Every policy's summary call resends the cached prompt where that
	// costs less, as the proxy's does whatever its policy.
	pol := cost.Policy{Budget: b.Input, Kept: kept, SummaryTokens: b.SummaryTokens, MinSavings: b.MinSavings, Head: min(head, first),
		SummaryPrices: summaryPrices, CachedSummary: true}
	switch name {
	case PolicyThreshold:
		pol.CompactAt = b.CompactAt
	case PolicyCacheAware:
		pol.CompactAt, pol.ColdAt = cost.WarmShare(b.CompactAt, b.EmergencyAt), coldShare
		// A fold keeps at least the first call and a quarter of the
		// recent history the gate keeps.
		pol.Fold = true
		pol.MinKeep = max(0, min(first-pol.Head+b.KeepRecentTokens/4, b.Input-1-pol.Head-pol.SummaryTokens))
	}
	var err error
	pc.Outcome, err = cost.Simulate(prices, ttl, cost.Uncompacted(calls), pol)
	return pc, err
}

// mergeSteps puts the steps of a file's conversations in one order: by
// time, a step without one at the time of the step before it in its
// conversation; when no step has a time, one conversation after another.
func mergeSteps(threads [][]cost.Step) []cost.Step {
	var out []cost.Step
	timed := false
	for _, steps := range threads {
		var at time.Time
		for _, s := range steps {
			if s.Time.IsZero() {
				s.Time = at
			}
			at, timed = s.Time, timed || !s.Time.IsZero()
			out = append(out, s)
		}
	}
	if timed {
		slices.SortStableFunc(out, func(a, b cost.Step) int { return a.Time.Compare(b.Time) })
	}
	return out
}

// addOutcome adds pc to the total t; the steps stay each session's own.
func addOutcome(t *PolicyCost, pc PolicyCost) {
	if pc.Probe != nil {
		if t.Probe == nil {
			t.Probe = &PolicyProbes{}
		}
		t.Probe.add(*pc.Probe)
	}
	t.USD += pc.USD
	t.SummaryUSD += pc.SummaryUSD
	t.Compactions += pc.Compactions
	t.CachedSummaries += pc.CachedSummaries
	t.PromptTokens += pc.PromptTokens
	t.Overflows += pc.Overflows
	addBill(&t.Calls, pc.Calls)
}

// head is the least prompt an agent's compaction left cached, by the
// reads of the call that followed it; 0 when the agent made none.
func head(calls []cost.Call) int {
	h := 0
	for _, c := range calls {
		if c.Rewritten && c.Head > 0 && (h == 0 || c.Head < h) {
			h = c.Head
		}
	}
	return h
}

// latestTTL is the lifetime of the latest recorded cache write, else 5
// minutes.
func latestTTL(reqs []cost.Request) time.Duration {
	for i := len(reqs) - 1; i >= 0; i-- {
		switch {
		case reqs[i].CacheWrite1h > 0:
			return cost.TTL1h
		case reqs[i].CacheWrite5m > 0:
			return cost.TTL5m
		}
	}
	return cost.TTL5m
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// WriteJSON writes the report as indented JSON.
func (r *CostReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes a row per session and policy, then the totals.
func (r *CostReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "session\tmodel\tcalls\tbudget\tttl\tbilled\tpolicy\tcost\tsummaries\tcompactions\tcached summaries\tprompt tokens\toverflows\tprobes\t")
	row := func(session, model, calls, budget, ttl, billed string, pc PolicyCost) {
		probes := "-"
		if pc.Probe != nil && pc.Probe.Probes > 0 {
			probes = fmt.Sprintf("%d/%d %.1f%%", pc.Probe.Answered, pc.Probe.Probes, 100*pc.Probe.Score)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t$%.2f\t$%.2f\t%d\t%d\t%s\t%d\t%s\t\n", session, model, calls, budget, ttl, billed,
			pc.Policy, pc.USD, pc.SummaryUSD, pc.Compactions, pc.CachedSummaries, kilo(pc.PromptTokens), pc.Overflows, probes)
	}
	for _, s := range r.Sessions {
		for i, pc := range s.Policies {
			if i == 0 {
				row(short(s.Session), s.Model, fmt.Sprint(s.Calls), kilo(s.Budget), s.CacheTTL, fmt.Sprintf("$%.2f", s.BilledUSD), pc)
			} else {
				row("", "", "", "", "", "", pc)
			}
		}
	}
	var billed float64
	calls := 0
	for _, s := range r.Sessions {
		billed += s.BilledUSD
		calls += s.Calls
	}
	for i, pc := range r.Totals {
		if i == 0 {
			row("total", "", fmt.Sprint(calls), "", "", fmt.Sprintf("$%.2f", billed), pc)
		} else {
			row("", "", "", "", "", "", pc)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s\n", s)
	}
	return nil
}
