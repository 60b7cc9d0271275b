package eval

import (
	"cmp"
	"context"
	"slices"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/recall"
)

// RecallReport is how much of what the summaries missed the recall tools
// give back: for each probe a summary misses, a deterministic oracle
// searches the folded originals with the probe's own matcher terms and
// recalls the top hit, as a model with `compact-host mcp` would.
type RecallReport struct {
	Window int `json:"window"`
	// Probes is every probe; Missed those the summary alone misses.
	Probes int `json:"probes"`
	Missed int `json:"missed"`
	// Answered is how many missed probes the summary and the recalled
	// text answer together; Share is Answered of Missed (1 when none
	// was missed).
	Answered int     `json:"answered"`
	Share    float64 `json:"share"`
	// ToolCalls counts the searches and recalls over the missed probes;
	// MeanToolCalls is per missed probe.
	ToolCalls     int      `json:"tool_calls"`
	MeanToolCalls float64  `json:"mean_tool_calls"`
	Unanswered    []string `json:"unanswered,omitempty"`
}

// maxOracleSearches bounds the searches for one probe: one per matcher
// term, the most telling first.
const maxOracleSearches = 4

// RunRecallOracle runs the probes as RunProbes does and, for every probe
// the summary misses, the oracle.
func RunRecallOracle(ctx context.Context, opts ProbeOptions) (*RecallReport, error) {
	rep := &RecallReport{}
	probeRep, err := walkProbes(ctx, opts, func(msgs []abi.Message, p *ProbePoint, text string, ps ProbePointScore) {
		var x *recall.Index
		for i := range p.Probes {
			rep.Probes++
			if i < len(ps.Probes) && ps.Probes[i].Answered || ps.Err != "" {
				continue
			}
			rep.Missed++
			if x == nil {
				folded := msgs[:p.At]
				key, _ := recall.KeyFor(folded)
				x = recall.New(folded, key)
			}
			q := &p.Probes[i]
			calls, ok := oracle(x, q, text)
			rep.ToolCalls += calls
			if ok {
				rep.Answered++
			} else {
				rep.Unanswered = append(rep.Unanswered, ps.Session+"@"+p.ID+"/"+q.ID)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	rep.Window = probeRep.Window
	rep.Share = 1
	if rep.Missed > 0 {
		rep.Share = float64(rep.Answered) / float64(rep.Missed)
		rep.MeanToolCalls = float64(rep.ToolCalls) / float64(rep.Missed)
	}
	return rep, nil
}

// oracle searches for q's terms one at a time and recalls the top hit of
// each search, until the summary and what was recalled answer q. It
// returns the tool calls made.
func oracle(x *recall.Index, q *Probe, summary string) (int, bool) {
	calls := 0
	seen := summary
	for _, query := range oracleQueries(q) {
		if calls/2 >= maxOracleSearches {
			break
		}
		calls++
		res, err := x.Search(query)
		if err != nil || len(res.Hits) == 0 {
			continue
		}
		calls++
		page, err := x.Recall(res.Hits[0].Ref, 1)
		if err != nil {
			continue
		}
		seen += "\n" + page.Text
		if q.answered(normalize(seen), foldProbe(seen)) {
			return calls, true
		}
	}
	return calls, false
}

// oracleQueries are q's matcher terms as searches: the terms every answer
// holds (the longest first, as the rarest), the path, the alternatives,
// then the regular expressions.
func oracleQueries(q *Probe) []recall.Query {
	var out []recall.Query
	all := slices.Clone(q.AllOf)
	slices.SortStableFunc(all, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, t := range all {
		out = append(out, recall.Query{Text: t})
	}
	if q.Path != "" {
		out = append(out, recall.Query{Text: q.Path})
	}
	for _, t := range q.AnyOf {
		out = append(out, recall.Query{Text: t})
	}
	for _, re := range q.Regex {
		out = append(out, recall.Query{Text: "(?i)" + re, Regexp: true})
	}
	return out
}
