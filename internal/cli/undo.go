package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
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
the agent went on from the compaction, or the file was edited. The block
names the length and hash of the bytes it was appended to, so undo works
on a copy of the file, after a move, or with the cache dir wiped.`,
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
		// No record under the cache dir (the file was copied or moved,
		// or the cache wiped): the block names what it was appended to.
		if rec, left, err = undoMarked(a, path); err != nil {
			return err
		}
	}
	if o.json {
		return json.NewEncoder(g.io.Out).Encode(map[string]any{"undone": path, "format": rec.Format, "bytes_removed": rec.Length,
			"size": rec.Offset, "compactions_left": left})
	}
	when := "" // unknown when found from the file alone
	if !rec.Time.IsZero() {
		when = " at " + rec.Time.Format("2006-01-02 15:04")
	}
	fmt.Fprintf(g.io.Out, "undid the compaction written into %s (%s)%s: removed %s bytes, the file is %s bytes again; %d compactions left\n",
		path, rec.Format, when, num(int(rec.Length)), num(int(rec.Offset)), left)
	return nil
}

// undoMarked takes away the latest compaction compact-host wrote into an
// agent's file, found from the file alone (formats.FindAppended): the
// block names the length and hash of the bytes it was appended to. It
// refuses (exit 7) when the agent wrote after the block or the file was
// edited, and changes nothing then.
func undoMarked(a *app, path string) (undoRec, int, error) {
	data, err := a.readInput(context.Background(), path)
	if err != nil {
		return undoRec{}, 0, err
	}
	b, err := formats.FindAppended(data)
	switch {
	case errors.Is(err, formats.ErrNoBlock):
		return undoRec{}, 0, withCode(ExitInput, fmt.Errorf("%s: no record of a compaction written by compact-host, in the file or under the cache dir, and it is not a compact-host session log: nothing to undo", path))
	case err != nil:
		return undoRec{}, 0, fmt.Errorf("%s: %w; nothing was changed", path, host.ErrLogChanged)
	case b.End < int64(len(data)):
		return undoRec{}, 0, fmt.Errorf("%s: %w: the agent wrote after the compaction at line %d; undoing it would lose those lines, so nothing was changed", path, host.ErrLogChanged, b.Line)
	}
	ap := host.Appended{Offset: b.Offset, Len: b.End - b.Offset, Prefix: sha256.Sum256(data[:b.Offset]), Block: sha256.Sum256(data[b.Offset:b.End])}
	if err := host.TruncateIfUnchanged(path, ap, 0); err != nil {
		return undoRec{}, 0, err
	}
	left := 0
	if s, err := formats.Read(bytes.NewReader(data[:b.Offset]), ""); err == nil {
		for _, c := range s.AgentCompactions {
			if c.Ours {
				left++
			}
		}
	}
	format, _ := formats.Detect(data[:min(len(data), 64<<10)])
	return undoRec{Format: format, Offset: b.Offset, Length: b.End - b.Offset}, left, nil
}
