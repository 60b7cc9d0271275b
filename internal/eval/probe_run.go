package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
)

// ProbeOptions say which probes to run and how the summaries are made.
type ProbeOptions struct {
	// Probes is a probe file or a directory of them.
	Probes string
	// Sessions are session files given by the user; a probe set's
	// session is looked up among them by file name first, then in the
	// shared corpus.
	Sessions []string
	// Strategy makes the summaries; default "structured".
	Strategy string
	// Window is the context window of the engine; default 200,000.
	Window int
	// Registry, InProcess and Model are as in Options.
	Registry  *plugin.Registry
	InProcess bool
	Model     host.ModelClient
}

// ProbeReport is the score of a strategy's summaries on the probes.
type ProbeReport struct {
	Strategy   string            `json:"strategy"`
	Offline    bool              `json:"offline"`
	Window     int               `json:"window"`
	Total      ProbeTally        `json:"total"`
	Categories []ProbeTally      `json:"categories"`
	Sessions   []ProbeTally      `json:"sessions"`
	Points     []ProbePointScore `json:"points"`
	// AgentComparisons score each compaction an agent made itself on the
	// probes of the point where it folded, beside our summary there.
	AgentComparisons []AgentProbeComparison `json:"agent_comparisons"`
}

// AgentProbeComparison is one compaction an agent made itself (Claude
// Code's compact summary, a Codex compacted record, a Roo Code or Cline
// condensation), scored on the probes of the point at its cut: the same
// folded messages [0, At), the same probes, the agent's text beside ours.
type AgentProbeComparison struct {
	Session      string `json:"session"`
	Agent        string `json:"agent"` // the session's format
	Point        string `json:"point"`
	At           int    `json:"at"`
	CompactionID string `json:"compaction_id"`
	// AgentText says what the agent's side is: what the agent continued
	// with in place of the folded messages, its system prompts aside:
	// "summary", "summary and replacement history", or "replacement history" when the
	// summary is encrypted or empty (Codex).
	AgentText   string `json:"agent_text"`
	AgentTokens int    `json:"agent_tokens"` // chars/4
	Probes      int    `json:"probes"`
	// AgentAnswered counts the probes the agent's side answers;
	// SummaryAnswered those its summary answers alone, without the
	// history it kept (nil when there is no summary text).
	AgentAnswered   int  `json:"agent_answered"`
	SummaryAnswered *int `json:"summary_answered,omitempty"`
	// OursAnswered counts the probes our summary at the point answers;
	// OursTokens is its size and OursNotCompacted says the point held one
	// message, scored as it stands.
	OursAnswered     int                `json:"ours_answered"`
	OursTokens       int                `json:"ours_tokens"`
	OursNotCompacted bool               `json:"ours_not_compacted,omitempty"`
	Results          []AgentProbeResult `json:"results"`
}

// AgentProbeResult is one probe answered, or not, on each side.
type AgentProbeResult struct {
	ID       string `json:"id"`
	Category string `json:"category"`
	Agent    bool   `json:"agent"`
	Ours     bool   `json:"ours"`
}

// ProbeTally counts the probes answered of a category, a session or all.
type ProbeTally struct {
	Name     string  `json:"name"`
	Probes   int     `json:"probes"`
	Answered int     `json:"answered"`
	Score    float64 `json:"score"`
}

func (t *ProbeTally) add(answered bool) {
	t.Probes++
	if answered {
		t.Answered++
	}
	t.Score = float64(t.Answered) / float64(t.Probes)
}

// ProbePointScore is one point of one session: the summary made there and
// each probe's result.
type ProbePointScore struct {
	Session string `json:"session"`
	Point   string `json:"point"`
	At      int    `json:"at"`
	// Folded is how many messages the compaction folded; less than At
	// when the cut could not fall at the point or messages are pinned.
	Folded        int  `json:"folded"`
	SummaryTokens int  `json:"summary_tokens"` // chars/4
	Emergency     bool `json:"emergency,omitempty"`
	// NotCompacted says the prefix held a single message (pinned ones
	// aside): nothing to fold, so the probes were scored on that message
	// as it stands, and Folded is 0.
	NotCompacted bool          `json:"not_compacted,omitempty"`
	Err          string        `json:"error,omitempty"`
	Probes       []ProbeResult `json:"probes"`
}

// ProbeResult is one probe's outcome.
type ProbeResult struct {
	ID       string `json:"id"`
	Category string `json:"category"`
	Question string `json:"question"`
	Answered bool   `json:"answered"`
}

// RunProbes makes a summary at every point of every probe set and scores
// the probes against it.
func RunProbes(ctx context.Context, opts ProbeOptions) (*ProbeReport, error) {
	return walkProbes(ctx, opts, nil)
}

// probeVisit sees one point of a walk: the session's messages, the
// point, the text the model sees of the prefix after the compaction, and
// the point's score.
type probeVisit func(msgs []abi.Message, p *ProbePoint, text string, ps ProbePointScore)

// walkProbes makes a summary at every point of every probe set, scores
// the probes against it, and shows each point to visit (when not nil).
func walkProbes(ctx context.Context, opts ProbeOptions, visit probeVisit) (*ProbeReport, error) {
	sets, err := LoadProbes(opts.Probes)
	if err != nil {
		return nil, err
	}
	if opts.Strategy == "" {
		opts.Strategy = targetStrategy
	}
	if opts.Window == 0 {
		opts.Window = DefaultWindows[0]
	}
	src, err := newSource(ctx, Options{Registry: opts.Registry, InProcess: opts.InProcess})
	if err != nil {
		return nil, err
	}
	defer src.close()
	strat, _, err := src.strategy(ctx, opts.Strategy)
	if err != nil {
		return nil, fmt.Errorf("eval: strategy %q: %w", opts.Strategy, err)
	}
	rep := &ProbeReport{Strategy: opts.Strategy, Offline: opts.Model == nil, Window: opts.Window, Total: ProbeTally{Name: "all"},
		AgentComparisons: []AgentProbeComparison{}}
	for _, set := range sets {
		path, err := probeSession(set, opts.Sessions)
		if err != nil {
			return nil, err
		}
		sess, _, err := loadSession(path)
		if err != nil {
			return nil, &SessionError{Path: path, Err: err}
		}
		if err := set.Resolve(sess.Messages); err != nil {
			return nil, err
		}
		for pi := range set.Points {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			p := &set.Points[pi]
			text, ps := summaryAt(ctx, opts, strat, sess.Messages, p.At)
			ps.Session, ps.Point = set.Session, p.ID
			ps = scorePoint(ps, p, text)
			rep.Points = append(rep.Points, ps)
			for ci := range sess.AgentCompactions {
				if c := &sess.AgentCompactions[ci]; !c.Ours && c.FirstKept == p.At {
					rep.AgentComparisons = append(rep.AgentComparisons, compareAgentProbes(sess.Format, c, p, ps))
				}
			}
			if visit != nil {
				visit(sess.Messages, p, text, ps)
			}
		}
	}
	rep.tally()
	return rep, nil
}

// probeSession finds a probe set's session file: among the sessions
// given, else in the corpus folders, in order.
func probeSession(set *ProbeSet, given []string) (string, error) {
	for _, p := range given {
		if filepath.Base(p) == set.Session {
			return p, nil
		}
	}
	dirs, err := CorpusDirs()
	if err != nil {
		return "", fmt.Errorf("%w: %s: session %q is not among the sessions given and %v", ErrNoSessions, set.File, set.Session, err)
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, set.Session)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s: session %q is not among the sessions given nor in %s", ErrNoSessions, set.File, set.Session, strings.Join(dirs, " or "))
}

// summaryAt compacts msgs[:at] as the engine would at a gate there and
// returns what the model would see of that prefix afterwards: the summary
// and any message of the prefix the cut left in the context, pinned ones
// excepted.
func summaryAt(ctx context.Context, opts ProbeOptions, strat host.Strategy, msgs []abi.Message, at int) (string, ProbePointScore) {
	ps := ProbePointScore{At: at}
	// One message is not folded into a summary of itself (the engine
	// refuses a summary no smaller than what it replaces): the model
	// sees that message, so it is what the probes are scored on.
	var unpinned []abi.Message
	for _, m := range msgs[:at] {
		if !m.Pinned {
			unpinned = append(unpinned, m)
		}
	}
	if len(unpinned) <= 1 {
		ps.NotCompacted = true
		return ContextText(unpinned), ps
	}
	hopts := []host.Option{host.WithStrategy(opts.Strategy, strat), host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	if opts.Model != nil {
		hopts = append(hopts, host.WithModel(opts.Model))
	}
	eng, err := host.New(host.Config{ContextWindow: opts.Window, Strategy: opts.Strategy, Fallbacks: []string{}, MinKeepMessages: 1}, hopts...)
	if err != nil {
		ps.Err = err.Error()
		return "", ps
	}
	sess := eng.NewSession()
	sess.Append(msgs[:at]...)
	// An assistant message, not a user one: a request after the prefix
	// would make the prefix's request look superseded to the engine.
	next := abi.Message{ID: "eval-probe-next", Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "Continuing."}}}
	sess.Append(next)
	c, err := eng.Compact(ctx, sess, host.CompactOptions{KeepRecentTokens: 1})
	if err != nil {
		ps.Err = err.Error()
		return "", ps
	}
	ps.Folded, ps.Emergency = c.MessagesFolded, c.Emergency
	ps.SummaryTokens = (utf8.RuneCountInString(c.Summary) + 3) / 4
	// Pinned messages are left out: they stand beside the summary
	// whatever it says, so they would answer probes for it.
	var seen []abi.Message
	for _, m := range sess.Context() {
		if m.ID != next.ID && !m.Pinned {
			seen = append(seen, m)
		}
	}
	return ContextText(seen), ps
}

// scorePoint scores every probe of p against text.
func scorePoint(ps ProbePointScore, p *ProbePoint, text string) ProbePointScore {
	norm, folded := normalize(text), foldProbe(text)
	for i := range p.Probes {
		q := &p.Probes[i]
		ps.Probes = append(ps.Probes, ProbeResult{ID: q.ID, Category: q.Category, Question: q.Question,
			Answered: ps.Err == "" && q.answered(norm, folded)})
	}
	return ps
}

// compareAgentProbes scores the agent's compaction c on the probes of p,
// the point at its cut, beside ours, already scored.
func compareAgentProbes(agent string, c *formats.AgentCompaction, p *ProbePoint, ours ProbePointScore) AgentProbeComparison {
	var side []abi.Message
	for _, m := range agentContext(*c) {
		if !m.Pinned {
			side = append(side, m)
		}
	}
	text := ContextText(side)
	cmp := AgentProbeComparison{Session: ours.Session, Agent: agent, Point: p.ID, At: p.At, CompactionID: c.ID,
		AgentTokens: (utf8.RuneCountInString(text) + 3) / 4, Probes: len(p.Probes),
		OursTokens: ours.SummaryTokens, OursNotCompacted: ours.NotCompacted}
	switch {
	case c.Summary == "":
		cmp.AgentText = "replacement history"
	case len(side) > 1:
		cmp.AgentText = "summary and replacement history"
	default:
		cmp.AgentText = "summary"
	}
	norm, folded := normalize(text), foldProbe(text)
	var sumNorm, sumFolded string
	if c.Summary != "" {
		sumNorm, sumFolded = normalize(c.Summary), foldProbe(c.Summary)
		cmp.SummaryAnswered = new(int)
	}
	for i := range p.Probes {
		q := &p.Probes[i]
		r := AgentProbeResult{ID: q.ID, Category: q.Category, Agent: q.answered(norm, folded), Ours: ours.Probes[i].Answered}
		if r.Agent {
			cmp.AgentAnswered++
		}
		if r.Ours {
			cmp.OursAnswered++
		}
		if cmp.SummaryAnswered != nil && q.answered(sumNorm, sumFolded) {
			*cmp.SummaryAnswered++
		}
		cmp.Results = append(cmp.Results, r)
	}
	return cmp
}

// tally fills the totals from the points.
func (r *ProbeReport) tally() {
	r.Total = ProbeTally{Name: "all"}
	r.Categories = r.Categories[:0]
	for _, c := range ProbeCategories {
		r.Categories = append(r.Categories, ProbeTally{Name: c})
	}
	r.Sessions = r.Sessions[:0]
	sessions := map[string]int{}
	for _, p := range r.Points {
		si, ok := sessions[p.Session]
		if !ok {
			si = len(r.Sessions)
			sessions[p.Session] = si
			r.Sessions = append(r.Sessions, ProbeTally{Name: p.Session})
		}
		for _, q := range p.Probes {
			r.Total.add(q.Answered)
			r.Sessions[si].add(q.Answered)
			for ci := range r.Categories {
				if r.Categories[ci].Name == q.Category {
					r.Categories[ci].add(q.Answered)
				}
			}
		}
	}
}

// MinCategory is the lowest category score among categories with probes,
// 1 when there are none.
func (r *ProbeReport) MinCategory() float64 {
	lowest := 1.0
	for _, c := range r.Categories {
		if c.Probes > 0 {
			lowest = min(lowest, c.Score)
		}
	}
	return lowest
}

// WriteJSON writes the report as indented JSON.
func (r *ProbeReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the per-category and per-session tables, then every
// probe not answered.
func (r *ProbeReport) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	mode := "offline"
	if !r.Offline {
		mode = "with a model"
	}
	fmt.Fprintf(ew, "Probes answered by the %s summary (%s, window %s): %d of %d, %.1f%%.\n\n", r.Strategy, mode, kilo(r.Window),
		r.Total.Answered, r.Total.Probes, 100*r.Total.Score)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "category\tprobes\tanswered\tscore\t")
	for _, c := range r.Categories {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t\n", c.Name, c.Probes, c.Answered, pctOf(c.Answered, c.Probes))
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%s\t\n", r.Total.Probes, r.Total.Answered, pctOf(r.Total.Answered, r.Total.Probes))
	tw.Flush()
	fmt.Fprintln(ew)
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "session\tpoints\tprobes\tanswered\tscore\t")
	for _, s := range r.Sessions {
		points := 0
		for _, p := range r.Points {
			if p.Session == s.Name {
				points++
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", s.Name, points, s.Probes, s.Answered, pctOf(s.Answered, s.Probes))
	}
	tw.Flush()
	if len(r.AgentComparisons) > 0 {
		fmt.Fprintf(ew, "\nThe agents' own compactions, scored on the probes of the point at their cut:\n")
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "session\tat\tagent's side\ttokens\tagent\tsummary alone\tours (%s)\ttokens\t\n", r.Strategy)
		for _, c := range r.AgentComparisons {
			alone := "-"
			if c.SummaryAnswered != nil {
				alone = fmt.Sprintf("%d/%d", *c.SummaryAnswered, c.Probes)
			}
			ours := fmt.Sprintf("%d/%d", c.OursAnswered, c.Probes)
			if c.OursNotCompacted {
				ours += " (not compacted)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d/%d\t%s\t%s\t%d\t\n", c.Session, c.At, c.AgentText, c.AgentTokens,
				c.AgentAnswered, c.Probes, alone, ours, c.OursTokens)
		}
		tw.Flush()
	}
	var missed []string
	for _, p := range r.Points {
		if p.NotCompacted {
			fmt.Fprintf(ew, "\n%s @%d (%s): not compacted: one message before the point, scored as it stands.\n", p.Session, p.At, p.Point)
		}
		if p.Err != "" {
			missed = append(missed, fmt.Sprintf("%s @%d (%s): compaction failed: %s", p.Session, p.At, p.Point, p.Err))
		}
		for _, q := range p.Probes {
			if !q.Answered && p.Err == "" {
				missed = append(missed, fmt.Sprintf("%s @%d %s/%s [%s] %s", p.Session, p.At, p.Point, q.ID, q.Category, q.Question))
			}
		}
	}
	if len(missed) > 0 {
		fmt.Fprintf(ew, "\nNot answered:\n")
		for _, m := range missed {
			fmt.Fprintf(ew, "  %s\n", m)
		}
	}
	return ew.err
}
