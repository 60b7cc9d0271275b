package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/compact-host/compact-host/host"
	"github.com/spf13/cobra"
)

type undoOptions struct {
	engine engineFlags
	json   bool
}

func newUndoCmd(g *globals) *cobra.Command {
	o := &undoOptions{}
	cmd := &cobra.Command{
		Use:   "undo [flags] FILE",
		Short: "Revert the latest compaction of a session log or agent session file",
		Long: `Revert the latest compaction of a compact-host session log. The folded
messages come back exactly as they were; the undo is appended to the log,
so it survives a reload. Run it again to revert the compaction before.

For a Claude Code session or Codex rollout that compact-host wrote a
compaction into (--in-place or -o), undo removes exactly the lines it
appended, leaving the file byte for byte as it was: when the agent's lines
were carried after the compaction, the compaction and the copies go and
the agent's lines stay. It refuses (exit 7) when the file changed since:
the agent went on from the compaction, or the file was edited.`,
		Example: `  compact-host undo session.compacted.jsonl
  compact-host undo ~/.claude/projects/-home-me-app/0b1c….jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runUndo(cmd.Context(), g, o, args[0]) },
	}
	addEngineFlags(cmd, &o.engine)
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runUndo(ctx context.Context, g *globals, o *undoOptions, path string) error {
	a, err := newApp(g, o.engine)
	if err != nil {
		return err
	}
	e, err := host.New(a.hostConfig(), host.WithLogger(a.log))
	if err != nil {
		return a.settingError(err)
	}
	data, err := a.readInput(ctx, path)
	if err != nil {
		return err
	}
	if !host.IsSessionLog(data) {
		return undoWriteBack(a, g, o, path)
	}
	in, err := a.loadInput(ctx, e, path, "", true)
	if err != nil {
		return err
	}
	defer in.Session.Close()
	if !in.Log {
		return withCode(ExitInput, fmt.Errorf("%s is a %s session, not a compact-host session log: it records no compaction to undo", path, in.Format))
	}
	before := in.Session.ContextTokens()
	c, err := in.Session.Undo()
	if errors.Is(err, host.ErrNothingToUndo) {
		return withCode(ExitInput, fmt.Errorf("%s: no compaction to undo", path))
	}
	if err != nil {
		return withCode(ExitError, err)
	}
	after := in.Session.ContextTokens()
	if o.json {
		return json.NewEncoder(g.io.Out).Encode(map[string]any{"undone": c.ID, "strategy": c.Strategy, "messages_restored": c.MessagesFolded,
			"tokens_before": before, "tokens_after": after, "compactions_left": len(in.Session.Compactions())})
	}
	fmt.Fprintf(g.io.Out, "undid %s (%s, %s): %d messages restored; context %s → %s tokens; %d compactions left\n",
		c.ID, c.Strategy, c.Time.Format("2006-01-02 15:04"), c.MessagesFolded, num(before), num(after), len(in.Session.Compactions()))
	return nil
}

// undoWriteBack removes the compaction compact-host appended last to an
// agent's session file.
func undoWriteBack(a *app, g *globals, o *undoOptions, path string) error {
	rec, left, ok, err := a.undoAppended(path)
	if err != nil {
		return err
	}
	if !ok {
		return withCode(ExitInput, fmt.Errorf("%s: compact-host has no record of a compaction it wrote into this file, and it is not a compact-host session log: nothing to undo", path))
	}
	if o.json {
		return json.NewEncoder(g.io.Out).Encode(map[string]any{"undone": path, "format": rec.Format, "bytes_removed": rec.Length,
			"size": rec.Offset, "compactions_left": left})
	}
	fmt.Fprintf(g.io.Out, "undid the compaction written into %s (%s) at %s: removed %s bytes, the file is %s bytes again; %d compactions left\n",
		path, rec.Format, rec.Time.Format("2006-01-02 15:04"), num(int(rec.Length)), num(int(rec.Offset)), left)
	return nil
}
