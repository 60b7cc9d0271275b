package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/internal/atomicfile"
	"github.com/compact-host/compact-host/internal/server"
	"github.com/compact-host/compact-host/internal/sessionio"
	"github.com/spf13/cobra"
)

type compactOptions struct {
	engine    engineFlags
	format    string
	outFormat string
	output    string
	inPlace   bool
	threshold float64
	focus     string
	dryRun    bool
	json      bool
	reading   readingFlags
	lockWait  time.Duration
	cost      costFlags
	// allowFallback accepts a fallback's summary when the strategy was
	// named: exit 0 instead of 9.
	allowFallback bool
}

func addCompactFlags(cmd *cobra.Command, o *compactOptions) {
	addEngineFlags(cmd, &o.engine)
	addReadingFlags(cmd, &o.reading)
	addOfflineFallbackFlag(cmd, &o.engine)
	addCostFlags(cmd, &o.cost)
	fl := cmd.Flags()
	fl.StringVar(&o.format, "format", "", "input format (default: detected): "+strings.Join(formats.Names(), ", "))
	fl.StringVar(&o.outFormat, "output-format", "", "output format: canonical (a session log, undoable), anthropic or openai (the compacted request), claude-code or codex (the agent's own file with the compaction recorded as the agent records one; for an input of that format); default: the input's format where it can be written, else canonical")
	fl.StringVarP(&o.output, "output", "o", "", "where to write the compacted session ('-' for stdout); default: FILE.compacted.<ext> beside the input, or stdout for stdin")
	fl.BoolVar(&o.inPlace, "in-place", false, "append the compaction to the input file itself: a session log, a Claude Code session or a Codex rollout ('compact-host undo' reverts it)")
	fl.Float64Var(&o.threshold, "threshold", 0, "compact only if the context uses at least this share of the budget (0.0-1.0), as the agent's gate would; default: always compact")
	fl.StringVar(&o.focus, "focus", "", "what the summary must keep, in your words (e.g. \"the failing auth tests\")")
	fl.BoolVar(&o.dryRun, "dry-run", false, "show the plan (where it cuts, tokens before and after, what is folded) and write nothing")
	fl.BoolVar(&o.json, "json", false, "print the report as JSON")
	fl.BoolVar(&o.allowFallback, "allow-fallback", false, "exit 0, not 9, when the strategy named by --strategy or the config fails and a fallback writes the summary (the report still says so)")
	fl.DurationVar(&o.lockWait, "lock-wait", defaultLockWait, "with --in-place: how long to wait for another program's lock on the file (a running agent's), saying so after a moment; then exit 7")
}

func newCompactCmd(g *globals) *cobra.Command {
	o := &compactOptions{}
	cmd := &cobra.Command{
		Use:   "compact [flags] [FILE|-]",
		Short: "Compact a session file (the default command)",
		Long: `Compact a session: cut the history where no provider will reject it, have
the older part summarized, and write the result. The input is read from
FILE, or stdin when FILE is '-' or absent.

The result is written beside the input as FILE.compacted.<ext>, or where -o
says. A compact-host session log keeps every original message, so
'compact-host undo' reverts the compaction; --in-place appends it to the
input log itself. Anthropic and OpenAI request files are written as the
compacted request. A Claude Code session or Codex rollout gets the
compaction appended the way the agent records its own, so resuming it in
the agent continues from the summary; with --in-place the file itself.
Lines a running agent appends meanwhile are carried after the compaction
(the report says "carried"); a file that is replaced, shortened or edited,
or lines that cannot be carried, are refused with exit 7 and leave the
file as the agent wrote it. Other formats are written as a session log.

When a strategy fails (its model refused, say), the next one writes the
summary and the report says so. If you named the strategy (--strategy, or
strategy in the config file), that is exit 9, the output written all the
same; --allow-fallback accepts the fallback with exit 0.

Examples:
  compact-host compact --strategy=structured session.jsonl
  compact-host compact --dry-run --context-window 32000 ~/.claude/projects/x/abc.jsonl
  compact-host compact --threshold 0.8 --in-place run.jsonl
  compact-host compact --in-place ~/.claude/projects/-home-me-app/0b1c….jsonl
  cat request.json | compact-host compact --format anthropic --focus "the auth bug" -o -`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runCompact(cmd.Context(), g, o, args) },
	}
	addCompactFlags(cmd, o)
	return cmd
}

// compactReport is what compact prints: the API's report of
// /v1/compact, so a field has one name in both, with the files.
type compactReport struct {
	Input string `json:"input"`
	server.CompactReport
	Output string `json:"output,omitempty"`
	// StrategyFailed says the strategy asked for failed, so a fallback
	// (or the emergency path) wrote the summary: see Fallbacks.
	StrategyFailed bool             `json:"strategy_failed,omitempty"`
	WriteBack      *writeBackReport `json:"write_back,omitempty"`
	Compaction     *host.Compaction `json:"compaction,omitempty"`
	// Cost is the compaction's cost to the agent, when its model has
	// prices.
	Cost *compactCost `json:"cost,omitempty"`
}

func runCompact(ctx context.Context, g *globals, o *compactOptions, args []string) error {
	if !(o.threshold >= 0 && o.threshold <= 1) {
		return usageError{fmt.Errorf("--threshold %g: want a share between 0 and 1", o.threshold)}
	}
	path := ""
	if len(args) == 1 {
		path = args[0]
	}
	if path == "" && IsTerminal(g.io.In) {
		return usageError{errors.New("no session given: pass a FILE, or pipe one on stdin")}
	}
	if o.inPlace && (path == "" || path == "-") {
		return usageError{errors.New("--in-place needs a FILE, not stdin")}
	}
	if o.lockWait <= 0 {
		return usageError{fmt.Errorf("--lock-wait %s: want a positive duration like 30s", o.lockWait)}
	}
	costs, err := o.cost.parse()
	if err != nil {
		return err
	}
	a, err := newApp(g, o.engine)
	if err != nil {
		return err
	}
	defer a.close()
	a.reading = o.reading.options()
	e, err := a.engine(ctx, !o.dryRun)
	if err != nil {
		return err
	}
	if o.inPlace && !o.dryRun {
		if err := a.waitForLock(ctx, path, o.lockWait); err != nil {
			return err
		}
	}
	a.setStep("reading")
	in, src, err := a.loadSource(ctx, e, path, o.format, o.inPlace && !o.dryRun)
	if err != nil {
		return err
	}
	defer in.Session.Close()
	if o.inPlace && !in.Log && writeBackFormat(o, in) == "" {
		return usageError{fmt.Errorf("--in-place needs a compact-host session log, a Claude Code session or a Codex rollout; %s is %s (write a copy with -o)", displayPath(in.path), in.Format)}
	}
	began := time.Now()
	s := in.Session
	b := e.Budget()
	hc := a.hostConfig()
	strategy := pick(hc.Strategy, host.DefaultStrategy)
	rep := compactReport{Input: displayPath(in.path)}
	rep.Format, rep.Messages, rep.Model = in.Format, s.Len(), hc.Model
	rep.ContextWindow, rep.Budget, rep.Tokenizer = b.ContextWindow, b.Input, e.Tokenizer()
	rep.SkippedRecords, rep.Repaired = in.Skipped, in.Repaired
	// The agent's overhead counts when the compaction goes back into its
	// file: the agent then sends it with every request.
	overhead := 0
	if writeBackFormat(o, in) != "" {
		overhead = in.Overhead.Tokens
	}
	rep.TokensBefore = s.ContextTokens() + overhead
	var fallbacks []string
	strategyFailed := false
	e.Subscribe(func(ev host.Event) {
		if f, ok := ev.(*host.FallbackEvent); ok {
			strategyFailed = strategyFailed || f.From == strategy
			fallbacks = append(fallbacks, fmt.Sprintf("%s → %s: %v", f.From, f.To, f.Err))
			a.progress("%s failed (%v); trying %s", f.From, f.Err, f.To)
			a.setStep(f.To)
		}
	})

	if !o.dryRun {
		a.sayOffline()
		a.setStep(strategy)
		a.progress("compacting %s (%d messages, %d tokens) with %s…", rep.Input, rep.Messages, rep.TokensBefore, strategy)
	}
	res, err := sessionio.Compact(ctx, e, s, sessionio.Options{Focus: o.focus, Threshold: o.threshold, DryRun: o.dryRun, Overhead: overhead})
	if err != nil {
		return err
	}
	rep.Action, rep.TokensAfter, rep.Fits = res.Action, res.TokensAfter, res.Fits
	if res.Plan != nil {
		rep.Plan = server.PlanOf(*res.Plan)
	}
	if res.Action == sessionio.ActionNone {
		rep.Threshold = o.threshold
	}
	if c := res.Compaction; c != nil {
		rep.Strategy, rep.Offline, rep.Folded, rep.Compaction = c.Strategy, c.Offline, c.MessagesFolded, c
	}
	if !o.dryRun && res.Action != sessionio.ActionNone {
		rep.RequestedStrategy = strategy
		rep.Kept = len(s.Context())
	}
	rep.Fallbacks = fallbacks
	rep.StrategyFailed = strategyFailed && res.Compaction != nil
	rep.ModelStats = a.meter.Stats()
	if res.Plan != nil || res.Compaction != nil {
		rep.Cost = priceCompaction(costs, hc.Model, in.Requests, rep.TokensBefore, rep.TokensAfter, rep.ModelStats.CostUSD, time.Now())
	}
	for _, f := range fallbacks {
		a.note("warning: fallback %s", f)
	}

	// With -o - and --json the session takes stdout; the report goes to
	// stderr as one JSON line among the notes, so neither stream mixes
	// two kinds of document.
	reportTo, oneLine := g.io.Out, false
	if !o.dryRun && o.json && (o.output == "-" || o.output == "" && in.path == "-") {
		reportTo, oneLine = g.io.Err, true
	}
	if !o.dryRun && rep.Action != sessionio.ActionNone && rep.Action != sessionio.ActionNothingToFold || (!o.dryRun && o.output != "") {
		a.setStep("writing")
		// A write-back appends under the file's lock; a session log is
		// held by the session itself, and written as it went.
		if o.inPlace && writeBackFormat(o, in) != "" {
			if err := a.waitForLock(ctx, in.path, o.lockWait); err != nil {
				return err
			}
		}
		if err := writeOutput(a, in, src, o, &rep); err != nil {
			if rep.WriteBack != nil && o.json {
				_ = printCompactReport(reportTo, true, oneLine, &rep) // what was taken back, for the caller's records
			}
			return err
		}
	}
	rep.DurationMS = float64(time.Since(began).Microseconds()) / 1000
	if err := printCompactReport(reportTo, o.json, oneLine, &rep); err != nil {
		return err
	}
	if !rep.Fits && !o.dryRun {
		return withCode(ExitNotFit, fmt.Errorf("the session is still over its budget: %d of %d tokens", rep.TokensAfter, rep.Budget))
	}
	if rep.StrategyFailed && !o.allowFallback {
		if named := strategySource(a, strategy); named != "" {
			written := "the result was written"
			if rep.Output != "" {
				written = "the result was written to " + displayPath(rep.Output)
			}
			return withCode(ExitStrategyFailed, fmt.Errorf("%s failed and %s wrote the summary instead; %s (--allow-fallback accepts a fallback with exit 0)",
				named, rep.Strategy, written))
		}
	}
	return nil
}

// strategySource names where the strategy was asked for, the flag or the
// config key, or "" for the default: only a strategy someone chose makes
// its failure an error.
func strategySource(a *app, strategy string) string {
	switch a.origin("Strategy") {
	case fromFlag:
		return fmt.Sprintf("--strategy %s", strategy)
	case fromConfig:
		return fmt.Sprintf("strategy %q of the config", strategy)
	}
	return ""
}

// writeOutput writes the compacted session where the options say. A
// Claude Code session or Codex rollout is written back in its own format
// unless another is asked for.
func writeOutput(a *app, in *input, src *source, o *compactOptions, rep *compactReport) error {
	if writeBackFormat(o, in) != "" {
		return writeBack(a, in, src, o, rep)
	}
	s := in.Session
	outFormat := sessionio.OutputFormat(o.outFormat, in.Format)
	if !slices.Contains(sessionio.Writable, outFormat) {
		return usageError{fmt.Errorf("--output-format %q: want canonical, anthropic or openai", outFormat)}
	}
	write := func(w io.Writer) error { return sessionio.Write(w, s, outFormat) }
	rep.OutputFormat = outFormat
	if o.inPlace {
		// The session was opened for appending: its entries are already
		// in the log.
		rep.Output = in.path
		return nil
	}
	out := o.output
	if out == "" {
		if in.path == "-" {
			out = "-"
		} else {
			ext := ".jsonl"
			if outFormat != formats.Canonical {
				ext = ".json"
			}
			base := strings.TrimSuffix(in.path, filepath.Ext(in.path))
			base = strings.TrimSuffix(base, ".traj")
			out = base + ".compacted" + ext
		}
	}
	rep.Output = out
	if out == "-" {
		rep.Output = "stdout"
		return write(a.g.io.Out)
	}
	return atomicfile.Write(out, 0o644, write)
}

func printCompactReport(w io.Writer, asJSON, oneLine bool, r *compactReport) error {
	if asJSON {
		enc := json.NewEncoder(w)
		if !oneLine {
			enc.SetIndent("", "  ")
		}
		return enc.Encode(r)
	}
	if r.Output == "stdout" {
		return nil // stdout holds the session itself
	}
	defer printModelLine(w, r)
	pct := func(n int) string { return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(max(r.Budget, 1))) }
	fmt.Fprintf(w, "%s: %s, %d messages\n", r.Input, r.Format, r.Messages)
	model := ""
	if r.Model != "" {
		model = r.Model + ", "
	}
	fmt.Fprintf(w, "budget: %s tokens of input (%swindow %s), counted with %s\n", num(r.Budget), model, num(r.ContextWindow), r.Tokenizer)
	switch {
	case r.Plan != nil:
		p := r.Plan
		turn := ""
		if p.TurnPrefix {
			turn = " (inside a turn: its start is summarized on its own)"
		}
		fmt.Fprintf(w, "plan: fold %d messages, keep %d from message %d (%s)%s\n", p.Folded, p.Kept, p.FirstKept, p.FirstKeptID, turn)
		fmt.Fprintf(w, "tokens: %s (%s) now; about %s after (%s kept + a summary of about %s)\n", num(r.TokensBefore), pct(r.TokensBefore), num(r.TokensAfter), num(p.TokensKept), num(p.SummaryTokens))
		fmt.Fprintf(w, "the summary must carry %d modified and %d read files\n", len(p.FilesModified), len(p.FilesRead))
		if r.Cost != nil {
			r.Cost.print(w, true)
		}
		fmt.Fprintln(w, "dry run: nothing written")
		return nil
	case r.Action == sessionio.ActionNone:
		fmt.Fprintf(w, "tokens: %s (%s), under the %.0f%% threshold: nothing to do\n", num(r.TokensBefore), pct(r.TokensBefore), 100*r.Threshold)
		return nil
	case r.Action == sessionio.ActionNothingToFold:
		fmt.Fprintf(w, "tokens: %s (%s): nothing can be folded while keeping the recent history (try --keep-recent)\n", num(r.TokensBefore), pct(r.TokensBefore))
		return nil
	}
	how := r.Strategy
	if r.Offline {
		how += ", offline"
	}
	if r.RequestedStrategy != "" && r.Strategy != r.RequestedStrategy {
		how += fmt.Sprintf(" (fallback: %s failed)", r.RequestedStrategy)
	}
	fmt.Fprintf(w, "%s with %s: folded %d messages; the context now has %d\n", r.Action, how, r.Folded, r.Kept)
	fmt.Fprintf(w, "tokens: %s (%s) → %s (%s)\n", num(r.TokensBefore), pct(r.TokensBefore), num(r.TokensAfter), pct(r.TokensAfter))
	if r.Cost != nil {
		r.Cost.print(w, false)
	}
	for _, f := range r.Fallbacks {
		fmt.Fprintf(w, "fallback: %s\n", f)
	}
	if r.Output != "" {
		fmt.Fprintf(w, "wrote %s (%s)\n", r.Output, r.OutputFormat)
	}
	if r.WriteBack != nil && r.WriteBack.String() != "" {
		fmt.Fprintln(w, r.WriteBack)
	}
	return nil
}

// printModelLine says what the model calls cost, when a model was used.
func printModelLine(w io.Writer, r *compactReport) {
	m := r.ModelStats
	if m.Calls == 0 {
		return
	}
	failed := ""
	if m.Failed > 0 {
		failed = fmt.Sprintf(", %d failed", m.Failed)
	}
	fmt.Fprintf(w, "model: %d calls%s; %s input, %s output tokens; $%.4f\n", m.Calls, failed,
		num(m.Usage.PromptTokens()), num(m.Usage.OutputTokens), m.CostUSD)
}

// num formats n with thousands separators.
func num(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + num(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func displayPath(p string) string {
	if p == "-" || p == "" {
		return "stdin"
	}
	return p
}

// IsTerminal reports whether v is a terminal device (a *os.File on a
// character device): progress lines go to stderr only then.
func IsTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
