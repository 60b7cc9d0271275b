package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
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
	Folded        int           `json:"folded"`
	SummaryTokens int           `json:"summary_tokens"` // chars/4
	Emergency     bool          `json:"emergency,omitempty"`
	Err           string        `json:"error,omitempty"`
	Probes        []ProbeResult `json:"probes"`
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
	rep := &ProbeReport{Strategy: opts.Strategy, Offline: opts.Model == nil, Window: opts.Window, Total: ProbeTally{Name: "all"}}
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
			if visit != nil {
				visit(sess.Messages, p, text, ps)
			}
		}
	}
	rep.tally()
	return rep, nil
}

// probeSession finds a probe set's session file.
func probeSession(set *ProbeSet, given []string) (string, error) {
	for _, p := range given {
		if filepath.Base(p) == set.Session {
			return p, nil
		}
	}
	dir, err := CorpusDir()
	if err != nil {
		return "", fmt.Errorf("%w: %s: session %q is not among the sessions given and %v", ErrNoSessions, set.File, set.Session, err)
	}
	return filepath.Join(dir, set.Session), nil
}

// summaryAt compacts msgs[:at] as the engine would at a gate there and
// returns what the model would see of that prefix afterwards: the summary
// and any message of the prefix the cut left in the context, pinned ones
// excepted.
func summaryAt(ctx context.Context, opts ProbeOptions, strat host.Strategy, msgs []abi.Message, at int) (string, ProbePointScore) {
	ps := ProbePointScore{At: at}
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
	var missed []string
	for _, p := range r.Points {
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
