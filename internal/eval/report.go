package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as plain-text tables for people.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	mode := "offline"
	if !r.Offline {
		mode = "with a model"
	}
	if r.TruncateToolOutputs {
		mode += ", tool outputs capped on entry"
	}
	fmt.Fprintf(ew, "Replays (%s; %s %s, %d CPUs).\n", mode, r.Go, r.Platform, r.CPUs)
	fmt.Fprintf(ew, "Tokens: the engine's calibrated estimates before→after, summed over compactions. Recall: files read/modified in the folded part that the context after compaction names.\n")
	fmt.Fprintf(ew, "Request kept: the folded part's latest user request / the session's latest request is in the context. Engine ms: per compaction, model time excluded (mean/max), host part alone (mean).\n\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "session\twindow\tstrategy\tcalls\tcompactions\temergency\ttokens\tratio\tmodified recall\tread recall\trequest kept: folded\tlatest\tvalidity\tengine ms\thost ms\tpeak heap MiB\t")
	for i := range r.Runs {
		run := &r.Runs[i]
		if run.Err != "" {
			fmt.Fprintf(tw, "%s\t%d\t%s\terror: %s\t\t\t\t\t\t\t\t\t\t\t\t\t\n", short(run.Session), run.Window, run.Strategy, run.Err)
			continue
		}
		tokens, ratioText, engine, hostMs := "-", "-", "-", "-"
		if len(run.Compactions) > 0 {
			tokens = fmt.Sprintf("%s→%s", kilo(run.TokensBefore), kilo(run.TokensAfter))
			ratioText = fmt.Sprintf("%.1f×", run.Compression)
			engine = fmt.Sprintf("%.1f/%.1f", run.EngineMillis.Mean, run.EngineMillis.Max)
			hostMs = fmt.Sprintf("%.2f", run.HostMillis.Mean)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t\n",
			short(run.Session), kilo(run.Window), run.Strategy, run.Calls, len(run.Compactions), run.Emergencies, tokens, ratioText,
			pctOf(run.Recall.ModifiedNamed, run.Recall.Modified), pctOf(run.Recall.ReadNamed, run.Recall.Read),
			pctOf(run.RequestsRetained, run.RequestsFolded), pctOf(run.LatestRetained, run.RequestsFolded),
			pctOf(run.ValidGates, run.Gates), engine, hostMs, float64(run.PeakHeapBytes)/(1<<20))
	}
	tw.Flush()

	if len(r.Accounting) > 0 {
		fmt.Fprintf(ew, "\nToken accounting: mean absolute error against the prompt tokens each file records (input + cache read + cache write), all reports / after three.\n")
		fmt.Fprintf(ew, "Overhead is what the first report counts beyond chars/4 of the messages (system prompt, tool schemas); \"declared\" passes it as Request.ToolSchemaTokens.\n\n")
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "session\treports\toverhead\tchars/4\to200k\tcalibrated\tcalibrated, overhead declared\t")
		for _, a := range r.Accounting {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", short(a.Session), a.Reports, kilo(a.Overhead),
				a.Chars.text(), a.O200k.text(), a.Calibrated.text(), a.CalibratedOverhead.text())
		}
		tw.Flush()
	}

	if len(r.AgentComparisons) > 0 {
		fmt.Fprintf(ew, "\nAgents' own compactions against ours on the same folded span: files named by path (by path or file name) in the summary text alone; tokens chars/4.\n")
		fmt.Fprintf(ew, "\"strategy only\" is the strategy's summary before the host adds the files and request it missed.\n\n")
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "session\tcompaction\tfolded\tby\ttokens\tmodified\tread\trequest kept\tstrategy only: modified\tread\t")
		byName := func(named, byName, of int) string {
			if of == 0 {
				return "-"
			}
			return fmt.Sprintf("%d/%d (%d)", named, of, byName)
		}
		for _, c := range r.AgentComparisons {
			fmt.Fprintf(tw, "%s\t%s\t%d\tagent (%s)\t%s\t%s\t%s\t%s\t\t\t\n", short(c.Session), shortID(c.CompactionID), c.FirstKept, c.AgentText,
				kilo(c.AgentTokens), byName(c.Agent.ModifiedNamed, c.Agent.ModifiedByName, c.Agent.Modified),
				byName(c.Agent.ReadNamed, c.Agent.ReadByName, c.Agent.Read), yesNo(c.RequestFolded, c.AgentRetained))
			for _, o := range c.Ours {
				if o.Err != "" && o.Folded == 0 {
					fmt.Fprintf(tw, "\t\t\t%s\terror: %s\t\t\t\t\t\t\n", o.Strategy, o.Err)
					continue
				}
				fmt.Fprintf(tw, "\t\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", o.Folded, o.Strategy, kilo(o.Tokens),
					byName(o.Recall.ModifiedNamed, o.Recall.ModifiedByName, o.Recall.Modified), byName(o.Recall.ReadNamed, o.Recall.ReadByName, o.Recall.Read),
					yesNo(c.RequestFolded, o.Retained),
					byName(o.StrategyRecall.ModifiedNamed, o.StrategyRecall.ModifiedByName, o.StrategyRecall.Modified),
					byName(o.StrategyRecall.ReadNamed, o.StrategyRecall.ReadByName, o.StrategyRecall.Read))
			}
		}
		tw.Flush()
	}

	fmt.Fprintf(ew, "\nStrategies:\n")
	for _, s := range r.Strategies {
		line := fmt.Sprintf("  %s: %s", s.Name, s.Transport)
		if s.Version != "" {
			line += " v" + s.Version
		}
		if s.Path != "" {
			line += " " + s.Path
		}
		if s.LoadMillis > 0 {
			line += fmt.Sprintf(", loaded in %.0f ms (not counted in compactions)", s.LoadMillis)
		}
		if s.Note != "" {
			line += "; " + s.Note
		}
		fmt.Fprintln(ew, line)
	}
	if len(r.Targets) > 0 {
		fmt.Fprintf(ew, "\nTargets:\n")
		for _, t := range r.Targets {
			mark := "MET   "
			if !t.Met {
				mark = "MISSED"
			}
			fmt.Fprintf(ew, "  %s %s: %s\n", mark, t.Name, t.Detail)
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(ew, "\nNotes:\n")
		for _, n := range r.Notes {
			fmt.Fprintf(ew, "  - %s\n", n)
		}
	}
	fmt.Fprintf(ew, "\nPeak heap: %s.\n", r.MemoryMethod)
	return ew.err
}

func (e AbsError) text() string {
	if e.N == 0 {
		return "-"
	}
	after := "-"
	if e.NAfter > 0 {
		after = fmt.Sprintf("%.1f%%", e.AfterThree)
	}
	return fmt.Sprintf("%.1f%% / %s", e.All, after)
}

func pctOf(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", 100*float64(n)/float64(of), n, of)
}

func yesNo(applies, v bool) string {
	switch {
	case !applies:
		return "-"
	case v:
		return "yes"
	}
	return "no"
}

// kilo writes a token count in thousands.
func kilo(n int) string {
	if n < 1000 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%.1fk", float64(n)/1000)
}

// short is a session name without its extension.
func short(name string) string {
	if i := strings.Index(name, "."); i > 0 {
		return name[:i]
	}
	return name
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:8] + "…"
	}
	return id
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
