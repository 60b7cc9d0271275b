package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	// cache has expired, and a warm cache only past the gate's
	// emergency share.
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
	// Prices, when known, replace the catalog's for every session.
	Prices cost.Prices
	// TTL is the cache's lifetime; 0 is the one of each session's latest
	// cache write, else 5 minutes.
	TTL time.Duration
	// ColdShare is the cache-aware policy's share of the budget past
	// which an expired cache is compacted; default 0.5.
	ColdShare float64
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
	// BilledUSD is what the recorded usage was billed, the reference the
	// replays are measured against.
	BilledUSD float64      `json:"billed_usd"`
	Policies  []PolicyCost `json:"policies"`
}

// PolicyCost is the outcome of one policy.
type PolicyCost struct {
	Policy string `json:"policy"`
	cost.Outcome
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
	for _, path := range paths {
		cs, skip, err := costSession(path, opts)
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
			t.USD += pc.USD
			t.SummaryUSD += pc.SummaryUSD
			t.Compactions += pc.Compactions
			t.PromptTokens += pc.PromptTokens
			t.Overflows += pc.Overflows
			addBill(&t.Calls, pc.Calls)
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
func costSession(path string, opts CostOptions) (cs *CostSession, skip string, err error) {
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
	eng, err := host.New(host.Config{Model: model, ContextWindow: opts.Window})
	if err != nil {
		return nil, "", err
	}
	b := eng.Budget()
	ttl := opts.TTL
	if ttl == 0 {
		ttl = latestTTL(reqs)
	}
	cs = &CostSession{Session: filepath.Base(path), Model: model, Calls: len(reqs), Budget: b.Input,
		CacheTTL: map[bool]string{true: "1h", false: "5m"}[ttl >= cost.TTL1h], BilledUSD: cost.BillRequests(prices, reqs).USD}
	calls := cost.CallsOf(reqs)
	uncompacted := cost.Uncompacted(calls)
	// A compaction leaves what the first call sent (the agent's system
	// prompt, tools and first request), the recent history kept verbatim
	// and the summary.
	kept := min(calls[0].PromptTokens+b.KeepRecentTokens+b.SummaryTokens, b.Input-1)
	for _, name := range opts.Policies {
		pc := PolicyCost{Policy: name}
		pol := cost.Policy{Budget: b.Input, Kept: kept, SummaryTokens: b.SummaryTokens, MinSavings: b.MinSavings}
		switch name {
		case PolicyAgent:
			pc.Calls = cost.Replay(prices, ttl, calls)
			pc.USD = pc.Calls.USD
			for _, c := range calls {
				pc.PromptTokens += c.PromptTokens
				if c.Rewritten {
					pc.Compactions++
				}
			}
			cs.Policies = append(cs.Policies, pc)
			continue
		case PolicyThreshold:
			pol.CompactAt = b.CompactAt
		case PolicyCacheAware:
			pol.CompactAt, pol.ColdAt = b.EmergencyAt, opts.ColdShare
		}
		if pc.Outcome, err = cost.Simulate(prices, ttl, uncompacted, pol); err != nil {
			return nil, "", err
		}
		cs.Policies = append(cs.Policies, pc)
	}
	return cs, "", nil
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
	fmt.Fprintln(tw, "session\tmodel\tcalls\tbudget\tttl\tbilled\tpolicy\tcost\tsummaries\tcompactions\tprompt tokens\toverflows\t")
	row := func(session, model, calls, budget, ttl, billed string, pc PolicyCost) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t$%.2f\t$%.2f\t%d\t%s\t%d\t\n", session, model, calls, budget, ttl, billed,
			pc.Policy, pc.USD, pc.SummaryUSD, pc.Compactions, kilo(pc.PromptTokens), pc.Overflows)
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
