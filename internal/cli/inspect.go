package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/internal/sessionio"
	"github.com/spf13/cobra"
)

type inspectOptions struct {
	engine  engineFlags
	reading readingFlags
	format  string
	largest int
	json    bool
	cost    costFlags
}

type inspectReport struct {
	Input         string `json:"input"`
	Format        string `json:"format"`
	Messages      int    `json:"messages"`
	Compactions   int    `json:"compactions"`
	ContextWindow int    `json:"context_window"`
	Budget        int    `json:"budget"`
	Tokenizer     string `json:"tokenizer"`
	// Tokens is the context's size: the live context of an agent's file
	// (what it sends when it resumes), or its full history with
	// --full-history.
	Tokens      int  `json:"tokens"`
	FullHistory bool `json:"full_history"`
	// HistoryTokens and HistoryMessages are the full history's size.
	HistoryTokens   int `json:"history_tokens"`
	HistoryMessages int `json:"history_messages"`
	// AgentOverhead is what the agent adds to every request; Request is
	// Tokens plus it, what the agent sends; Usage is Request's share of
	// the budget.
	AgentOverhead       int                      `json:"agent_overhead"`
	AgentOverheadSource string                   `json:"agent_overhead_source,omitempty"`
	Request             int                      `json:"request_tokens"`
	Usage               float64                  `json:"usage"`
	FileCompactions     []inspectCompaction      `json:"file_compactions,omitempty"`
	Subagents           []sessionio.SubagentInfo `json:"subagents,omitempty"`
	ByRole              host.RoleTokens          `json:"by_role"`
	Largest             []host.ToolOutput        `json:"largest_tool_outputs"`
	Thresholds          struct {
		Prune     float64 `json:"prune"`
		Compact   float64 `json:"compact"`
		Emergency float64 `json:"emergency"`
	} `json:"thresholds"`
	CrossedAt struct {
		Prune     int `json:"prune"`
		Compact   int `json:"compact"`
		Emergency int `json:"emergency"`
	} `json:"crossed_at_message"`
	Skipped  map[string]int `json:"skipped_records,omitempty"`
	Repaired map[string]int `json:"repaired,omitempty"`
	Files    struct {
		Read     int `json:"read"`
		Modified int `json:"modified"`
	} `json:"files"`
	// Cost is what the model calls the file records usage of were billed.
	Cost *fileCost `json:"cost,omitempty"`
}

// inspectCompaction is a compaction recorded in an agent's file.
type inspectCompaction struct {
	By            string `json:"by"` // "agent" or "compact-host"
	Line          int    `json:"line"`
	Bytes         int    `json:"bytes"`
	SummaryTokens int    `json:"summary_tokens"`
	PreTokens     int    `json:"pre_tokens,omitempty"`
}

func newInspectCmd(g *globals) *cobra.Command {
	o := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect [flags] [FILE|-]",
		Short: "Show a session's budget use, tokens by role, largest tool outputs, and where compaction would trigger",
		Example: `  compact-host inspect --model gpt-4o session.jsonl
  compact-host inspect --context-window 32000 --json rollout.jsonl`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runInspect(cmd.Context(), g, o, args) },
	}
	addBudgetFlags(cmd, &o.engine)
	addPluginsFlag(cmd, &o.engine)
	addInputFlags(cmd, &o.engine)
	addReadingFlags(cmd, &o.reading)
	addCostFlags(cmd, &o.cost)
	cmd.Flags().StringVar(&o.format, "format", "", "input format (default: detected)")
	cmd.Flags().IntVar(&o.largest, "largest", 5, "how many of the largest tool outputs to list (0 to 1000)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the report as JSON")
	return cmd
}

func runInspect(ctx context.Context, g *globals, o *inspectOptions, args []string) error {
	if o.largest < 0 || o.largest > 1000 {
		return usageError{fmt.Errorf("--largest %d: want 0 to 1000", o.largest)}
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
	e, err := a.engine(ctx, false)
	if err != nil {
		return err
	}
	in, err := a.loadInput(ctx, e, argOr(args, ""), o.format, false)
	if err != nil {
		return err
	}
	s := in.Session
	b := e.Budget()
	bd := e.Inspect(s, o.largest)
	r := inspectReport{Input: displayPath(in.path), Format: in.Format, Messages: s.Len(), Compactions: len(s.Compactions()) + len(in.Compactions),
		ContextWindow: b.ContextWindow, Budget: b.Input, Tokenizer: e.Tokenizer(), Tokens: bd.Tokens, FullHistory: in.FullHistory,
		HistoryTokens: in.HistoryTokens, HistoryMessages: in.HistoryMessages, AgentOverhead: in.Overhead.Tokens,
		AgentOverheadSource: in.Overhead.Source, Request: bd.Tokens + in.Overhead.Tokens, ByRole: bd.ByRole, Largest: bd.Largest,
		Subagents: in.Subagents}
	if in.Log {
		r.HistoryTokens, r.HistoryMessages = bd.Tokens, s.Len()
	}
	r.Usage = float64(r.Request) / float64(b.Input)
	for _, c := range in.Compactions {
		by := "agent"
		if c.Ours {
			by = "compact-host"
		}
		r.FileCompactions = append(r.FileCompactions, inspectCompaction{By: by, Line: c.Line, Bytes: c.Bytes,
			SummaryTokens: c.SummaryTokens, PreTokens: c.PreTokens})
	}
	r.Thresholds.Prune, r.Thresholds.Compact, r.Thresholds.Emergency = b.PruneAt, b.CompactAt, b.EmergencyAt
	r.CrossedAt.Prune, r.CrossedAt.Compact, r.CrossedAt.Emergency = bd.CrossedPrune, bd.CrossedCompact, bd.CrossedEmergency
	ops := s.FileOps()
	r.Files.Read, r.Files.Modified = len(ops.Read), len(ops.Modified)
	r.Skipped, r.Repaired = in.Skipped, in.Repaired
	r.Cost = billFile(costs, in.Requests, a.hostConfig().Model)
	w := g.io.Out
	if o.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "%s: %s, %d messages, %d compactions\n", r.Input, r.Format, r.Messages, r.Compactions)
	what := "live context (what the agent sends when it resumes)"
	if r.FullHistory {
		what = "full history (--full-history)"
	}
	fmt.Fprintf(w, "context: %s tokens, the %s; full history %s tokens in %d messages\n", num(r.Tokens), what, num(r.HistoryTokens), r.HistoryMessages)
	if r.AgentOverheadSource != "" {
		fmt.Fprintf(w, "agent overhead: %s\n", overheadText(in.Overhead))
	}
	fmt.Fprintf(w, "request: %s tokens of a %s budget (%.1f%%), window %s, counted with %s\n", num(r.Request), num(r.Budget), 100*r.Usage, num(r.ContextWindow), r.Tokenizer)
	for _, c := range r.FileCompactions {
		summary := num(c.SummaryTokens) + " tokens"
		if c.SummaryTokens == 0 {
			summary = "encrypted"
		}
		fmt.Fprintf(w, "compaction by %s at line %d: %s bytes, summary %s\n", c.By, c.Line, num(c.Bytes), summary)
	}
	if r.Cost != nil {
		r.Cost.print(w)
	}
	for _, sa := range r.Subagents {
		fmt.Fprintf(w, "subagent %s (call %s): %d messages, %s tokens, not in the context\n", sa.ID, sa.ToolUseID, sa.Messages, num(sa.Tokens))
	}
	fmt.Fprintf(w, "by role: system %s · user %s · assistant %s · tool results %s · summaries %s\n",
		num(r.ByRole.System), num(r.ByRole.User), num(r.ByRole.Assistant), num(r.ByRole.ToolResults), num(r.ByRole.Summary))
	fmt.Fprintf(w, "files: %d read, %d modified\n", r.Files.Read, r.Files.Modified)
	if len(r.Largest) > 0 {
		fmt.Fprintln(w, "largest tool outputs:")
		for _, t := range r.Largest {
			fmt.Fprintf(w, "  %8s tokens  %-14s %s\n", num(t.Tokens), t.Tool, t.MessageID)
		}
	}
	at := func(name string, share float64, idx int) {
		where := "never reached in this session"
		if idx >= 0 {
			where = fmt.Sprintf("reached at message %d", idx)
		}
		fmt.Fprintf(w, "  %-10s at %3.0f%% (%s tokens): %s\n", name, 100*share, num(int(share*float64(r.Budget))), where)
	}
	fmt.Fprintln(w, "thresholds (replaying the context message by message, without compaction):")
	at("prune", r.Thresholds.Prune, r.CrossedAt.Prune)
	at("compact", r.Thresholds.Compact, r.CrossedAt.Compact)
	at("emergency", r.Thresholds.Emergency, r.CrossedAt.Emergency)
	for k, v := range r.Skipped {
		fmt.Fprintf(w, "skipped %d %q records\n", v, k)
	}
	return nil
}

func argOr(args []string, def string) string {
	if len(args) > 0 {
		return args[0]
	}
	return def
}
