package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/internal/atomicfile"
	"github.com/compact-host/compact-host/internal/eval"
	"github.com/compact-host/compact-host/internal/server"
	"github.com/compact-host/compact-host/internal/suggest"
	"github.com/compact-host/compact-host/internal/tokencount"
	"github.com/spf13/cobra"
)

type evalOptions struct {
	engine          engineFlags
	sessions        []string
	windows         tokensList
	strategies      []string
	jsonPath        string
	charts          string
	inProcess       bool
	truncateOutputs bool
	json            bool
	probes          string
	minScore        float64
	minCategory     float64
	costMode        bool
	policies        []string
	coldShare       float64
	compactionModel string
	maxOutput       tokencount.Tokens
	cost            costFlags
}

func newEvalCmd(g *globals) *cobra.Command {
	o := &evalOptions{}
	cmd := &cobra.Command{
		Use:   "eval [flags] [SESSION...]",
		Short: "Replay sessions through the engine and measure compaction quality and speed",
		Long: `Replay each session as an agent would — append its messages in order, feed
the usage it records, run the gate before each assistant turn and after each
batch of tool results — at each context window, with each strategy, and
report: compactions, tokens before and after, compression, artifact recall
(the files read and modified in the folded part that the context still
names), task retention (the latest folded user request still present),
validity (no orphaned tool call or result), engine time per compaction
without the model, peak memory, the agents' own summaries where the session
holds one, and the accuracy of the token estimates against recorded usage.

With no SESSION, every file of ../shared/corpus is used when it is present.

With --probes, eval scores summaries instead of replaying: at every point a
probe file names, it compacts the session's messages before the point with
one strategy (default structured, offline) and checks the summary against
each probe's deterministic matcher (facts, file changes, next steps,
decisions), then prints the share answered per category and per session.
Probe files name their session by file name, found among the SESSION
arguments, else in ../shared/corpus, else in ../shared/corpus-new. Where
the session holds a compaction the agent made itself (Claude Code's compact
summary, Codex's compacted history, Roo Code's or Cline's condensation) and
a point sits at its cut, the agent's own text is scored on the same probes
and shown beside ours ("agent_comparisons" in --json). A point before which
there is a single message is not compacted: the probes are scored on that
message. --min-score and --min-category turn the scores into a check: exit
6 when either is missed.

With --cost, eval replays the model calls each Claude Code or Codex file
records, with their times and usage, through a model of the provider's
prompt cache under each --policy: agent (as the agent ran it), none
(compact only an overflowing prompt), threshold (compact past the gate's
share) and cache-aware (compact past --cold-share of the budget once the
cache has expired; a warm cache only halfway from the gate's share to its
emergency share; keep what the expected cost over the next calls favours,
from the growth and pauses seen so far), and reports the cost, the
summary calls' cost, compactions, the summary calls that resent the cached
prompt and prompt tokens per session and in total, beside what the
recorded usage was billed. Every policy's summary call is priced as the
proxy makes it: fresh to --compaction-model (default the provider's
cheaper model, as the proxy asks), or, while the cache is warm and when
that costs less, the cached prompt resent to the session's own model with
an instruction. Each sub-agent's calls
in a file are their own conversation; the start of the prompt the agent's
own compactions left cached (its recorded reads) stays cached across every
policy's compactions. Give --max-output-tokens the reply reserve the agent
ran with to replay at its budget. With --probes as well, each session that
has a probe set is also fed, message by message, to the engine under each
policy but agent (none: the gate at 99% of the budget), with the offline
structured strategy, a gate before every model call (its time and the
agent's overhead taken from the recorded calls), and the probes of each
point are scored on what the model sees then: the policy's own summaries
and what it kept verbatim. With --charts DIR, --cost writes SESSION.cost.svg
per session: the cumulative cost of each policy over the time since the
first call, compactions marked, beside the recorded bill.`,
		Example: `  compact-host eval
  compact-host eval --context-window 32k --strategy structured --charts charts/ session.jsonl
  compact-host eval --json > eval.json
  compact-host eval --probes internal/eval/testdata/probes --min-score 85 --min-category 70
  compact-host eval --cost --context-window 100k --policy threshold --policy cache-aware
  compact-host eval --cost --context-window 200k --max-output-tokens 32k session.jsonl
  compact-host eval --cost --charts charts/ session.jsonl
  compact-host eval --cost --probes internal/eval/testdata/probes --context-window 128k --max-output-tokens 32k`,
		RunE: func(cmd *cobra.Command, args []string) error { return runEval(cmd.Context(), g, o, args) },
	}
	fl := cmd.Flags()
	fl.Var(&o.windows, "context-window", "context window to replay at: "+tokenSyntaxHelp+" (repeatable; default 200k, 128k, 32k)")
	deprecatedAlias(cmd, g, "window", "context-window")
	fl.StringSliceVar(&o.strategies, "strategy", nil, "strategy to evaluate (repeatable; default structured, narrative, truncate)")
	fl.StringVar(&o.jsonPath, "json-file", "", "also write the report as JSON to this file")
	fl.BoolVar(&o.json, "json", false, "print the report as JSON instead of the table")
	fl.StringVar(&o.charts, "charts", "", "write an SVG chart per session (context tokens over turns, compactions marked; with --cost: cumulative cost over time per policy) into this directory")
	fl.BoolVar(&o.inProcess, "in-process", false, "run the built-in strategies linked in rather than as wasm")
	fl.BoolVar(&o.truncateOutputs, "truncate-outputs", false, "cap tool results with the truncators before appending them")
	fl.StringVar(&o.engine.pluginsDir, "plugins-dir", "", "directory of plugins, for strategies beyond the built-ins")
	fl.StringVar(&o.probes, "probes", "", "score summaries against a probe file or a directory of them instead of replaying (with --cost: score each policy's own compactions)")
	fl.Float64Var(&o.minScore, "min-score", 0, "with --probes: exit 6 when under this percentage of all probes is answered")
	fl.Float64Var(&o.minCategory, "min-category", 0, "with --probes: exit 6 when any category scores under this percentage")
	fl.BoolVar(&o.costMode, "cost", false, "replay the recorded model calls under compaction policies and report what they cost")
	fl.StringSliceVar(&o.policies, "policy", nil, "with --cost: policy to replay, agent, none, threshold or cache-aware (repeatable; default all)")
	fl.StringVar(&o.compactionModel, "compaction-model", "", "with --cost: the model fresh summary calls are billed at (default: the cheaper model the proxy asks, e.g. claude-haiku-4-5 for a Claude conversation)")
	fl.Float64Var(&o.coldShare, "cold-share", 0.5, "with --cost: the cache-aware policy compacts an expired cache past this share of the budget")
	fl.Var(&o.maxOutput, "max-output-tokens", "with --cost: tokens the agent reserved for the reply out of the window (default: the model's output limit)")
	addCostFlags(cmd, &o.cost)
	return cmd
}

// tokensList is a repeatable flag of token counts; a value may also list
// several, separated by commas.
type tokensList []int

func (l *tokensList) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		n, err := tokencount.Parse(part)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%q: want a window of at least 1 token", part)
		}
		*l = append(*l, n)
	}
	return nil
}

func (l *tokensList) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *tokensList) Type() string { return "tokens" }

func runEval(ctx context.Context, g *globals, o *evalOptions, args []string) error {
	if o.probes == "" && (o.minScore != 0 || o.minCategory != 0) {
		return usageError{errors.New("--min-score and --min-category apply to --probes; give a probe file or directory with --probes")}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"--min-score", o.minScore}, {"--min-category", o.minCategory}} {
		if f.v < 0 || f.v > 100 {
			return usageError{fmt.Errorf("%s %g: want a percentage from 0 to 100", f.name, f.v)}
		}
	}
	if o.probes != "" && (len(o.strategies) > 1 || len(o.windows) > 1 || (o.charts != "" && !o.costMode) || o.truncateOutputs) {
		return usageError{errors.New("--probes scores one strategy at one window: give --strategy and --context-window at most once, without --charts or --truncate-outputs")}
	}
	if o.maxOutput != 0 && !o.costMode {
		return usageError{errors.New("--max-output-tokens applies to --cost; the replay and the probes take each model's output limit")}
	}
	if o.costMode {
		return runEvalCost(g, o, args)
	}
	opts := eval.Options{Sessions: args, Strategies: o.strategies, InProcess: o.inProcess, TruncateToolOutputs: o.truncateOutputs}
	opts.Windows = o.windows
	a, err := newApp(g, o.engine)
	if err != nil {
		return err
	}
	defer a.close()
	reg, err := a.plugins(ctx, false)
	if err != nil {
		return err
	}
	opts.Registry = reg
	for _, name := range o.strategies {
		if _, err := reg.Strategy(ctx, name); errors.Is(err, plugin.ErrNotFound) {
			names := server.StrategyNames(ctx, reg)
			return usageError{fmt.Errorf("--strategy %q: no plugin provides this strategy; the strategies are %s%s", name, strings.Join(names, ", "), suggest.Hint(name, names))}
		}
	}
	// A session named on the command line that cannot be opened is the
	// user's mistake, told before minutes of replay.
	for _, p := range args {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		st, err := f.Stat()
		f.Close()
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return &inputError{Path: p, Msg: fmt.Sprintf("is a %s, not a session file", kindOf(st.Mode()))}
		}
	}
	if g.io.ErrIsTerminal && !g.jsonStderr {
		opts.Progress = g.io.Err
	}
	if o.probes != "" {
		return runProbes(ctx, g, o, opts)
	}
	if len(args) == 0 {
		if _, err := eval.CorpusDir(); err != nil {
			return withCode(ExitInput, fmt.Errorf("no SESSION given and %v", err))
		}
	}
	rep, err := eval.Run(ctx, opts)
	if errors.Is(err, eval.ErrNoSessions) {
		return withCode(ExitInput, err)
	}
	if err != nil {
		return err
	}
	if err := writeEvalReport(g, o, rep); err != nil {
		return err
	}
	return writeEvalCharts(g, o.charts, rep.WriteCharts)
}

// runProbes is eval --probes: one strategy at one window, scored against
// the probes.
func runProbes(ctx context.Context, g *globals, o *evalOptions, opts eval.Options) error {
	popts := eval.ProbeOptions{Probes: o.probes, Sessions: opts.Sessions, Registry: opts.Registry, InProcess: opts.InProcess}
	if len(opts.Strategies) == 1 {
		popts.Strategy = opts.Strategies[0]
	}
	if len(opts.Windows) == 1 {
		popts.Window = opts.Windows[0]
	}
	rep, err := eval.RunProbes(ctx, popts)
	switch {
	case errors.Is(err, eval.ErrBadProbes):
		return withCode(ExitInput, fmt.Errorf("--probes: %w", err))
	case errors.Is(err, eval.ErrNoSessions):
		return withCode(ExitInput, err)
	case err != nil:
		return err
	}
	if err := writeEvalReport(g, o, rep); err != nil {
		return err
	}
	if total := 100 * rep.Total.Score; total < o.minScore {
		return withCode(ExitNotFit, fmt.Errorf("probe score %.1f%% is under --min-score %g%%", total, o.minScore))
	}
	for _, c := range rep.Categories {
		if c.Probes > 0 && 100*c.Score < o.minCategory {
			return withCode(ExitNotFit, fmt.Errorf("probe category %s scores %.1f%%, under --min-category %g%%", c.Name, 100*c.Score, o.minCategory))
		}
	}
	return nil
}

// runEvalCost is eval --cost.
func runEvalCost(g *globals, o *evalOptions, args []string) error {
	if len(o.strategies) > 0 || len(o.windows) > 1 {
		return usageError{errors.New("--cost replays recorded calls at one window: give --context-window at most once, without --strategy")}
	}
	if !(o.coldShare > 0 && o.coldShare <= 1) {
		return usageError{fmt.Errorf("--cold-share %g: want a share above 0, at most 1", o.coldShare)}
	}
	for _, p := range o.policies {
		if !slices.Contains(eval.Policies, p) {
			return usageError{fmt.Errorf("--policy %q: want %s%s", p, strings.Join(eval.Policies, ", "), suggest.Hint(p, eval.Policies))}
		}
	}
	costs, err := o.cost.parse()
	if err != nil {
		return err
	}
	opts := eval.CostOptions{Sessions: args, Policies: o.policies, Prices: costs.prices, TTL: costs.ttl, ColdShare: o.coldShare,
		MaxOutputTokens: int(o.maxOutput), CompactionModel: o.compactionModel, Probes: o.probes}
	if len(o.windows) == 1 {
		opts.Window = o.windows[0]
	}
	rep, err := eval.RunCost(opts)
	switch {
	case errors.Is(err, eval.ErrNoSessions):
		return withCode(ExitInput, err)
	case err != nil:
		return err
	}
	if err := writeEvalReport(g, o, rep); err != nil {
		return err
	}
	return writeEvalCharts(g, o.charts, rep.WriteCharts)
}

// writeEvalCharts writes a report's charts with write into dir, when
// --charts gives one.
func writeEvalCharts(g *globals, dir string, write func(dir string) ([]string, error)) error {
	if dir == "" {
		return nil
	}
	files, err := write(dir)
	if err != nil {
		return err
	}
	g.say(fmt.Sprintf("wrote %d charts to %s", len(files), dir))
	return nil
}

// evalReport is what each kind of eval reports: a table for people, JSON
// for machines.
type evalReport interface {
	WriteJSON(io.Writer) error
	WriteTable(io.Writer) error
}

// writeEvalReport prints rep as --json asks, and writes its JSON to
// --json-file when given.
func writeEvalReport(g *globals, o *evalOptions, rep evalReport) error {
	var err error
	if o.json {
		err = rep.WriteJSON(g.io.Out)
	} else {
		err = rep.WriteTable(g.io.Out)
	}
	if err != nil {
		return err
	}
	if o.jsonPath != "" {
		return atomicfile.Write(o.jsonPath, 0o644, rep.WriteJSON)
	}
	return nil
}
