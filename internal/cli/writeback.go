package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/internal/atomicfile"
	"github.com/compact-host/compact-host/internal/sessionio"
)

// source is the bytes a session was read from, and for a regular file
// what it was when read, so a compaction is appended to it only if it
// is still that.
type source struct {
	data  []byte
	state *host.FileState // nil for stdin and pipes
}

// loadSource is loadInput keeping the bytes read: a compaction written
// back into a Claude Code or Codex file appends to exactly those bytes.
// With appendLog (--in-place) a regular file's size and modification time
// are checked around the read, and a file that changes meanwhile is being
// written by an agent and is refused (exit 7); a read for a copy takes
// the file as it is. Session logs go through loadInput, which has its own
// lock.
func (a *app) loadSource(ctx context.Context, e *host.Engine, path, format string, appendLog bool) (*input, *source, error) {
	if path == "" {
		path = "-"
	}
	src := &source{}
	if fi, err := os.Stat(path); appendLog && path != "-" && err == nil && fi.Mode().IsRegular() {
		limit := a.maxInputBytes()
		data, st, err := host.ReadFileState(path, limit)
		switch {
		case errors.Is(err, host.ErrSessionTooLarge):
			return nil, nil, tooLarge(path, limit)
		case err != nil:
			return nil, nil, err
		}
		src.data, src.state = data, &st
	} else {
		data, err := a.readInput(ctx, path)
		if err != nil {
			return nil, nil, err
		}
		src.data = data
	}
	if appendLog && path != "-" && (format == "" || format == formats.Canonical) && host.IsSessionLog(src.data) {
		in, err := a.loadInput(ctx, e, path, format, true)
		return in, src, err
	}
	in, err := sessionio.ReadWith(e, displayPath(path), src.data, format, a.reading)
	if err != nil {
		return nil, nil, withCode(ExitInput, err)
	}
	for _, w := range in.Warnings {
		a.note("warning: %s", w)
	}
	return &input{path: path, Input: in}, src, nil
}

// writeBackFormat is the agent format the compaction is written back in:
// the input's, when it is a Claude Code session or a Codex rollout and
// no other output format was asked for; "" otherwise.
func writeBackFormat(o *compactOptions, in *input) string {
	if !slices.Contains(formats.WritableFormats, in.Format) {
		return ""
	}
	if o.outFormat == "" || o.outFormat == in.Format {
		return in.Format
	}
	return ""
}

// writeBack records the session's latest compaction in the agent's own
// file: appended to the input with --in-place, or to a copy of it at -o
// (or beside it). What was appended is remembered (undoRecord), so undo
// takes exactly that away.
func writeBack(a *app, in *input, src *source, o *compactOptions, rep *compactReport) error {
	s := in.Session
	rep.OutputFormat = in.Format
	block, err := writeBackBlock(s, src.data, rep, in.path)
	if err != nil {
		return err
	}
	if o.inPlace {
		rep.Output = in.path
		if len(block) == 0 {
			return nil
		}
		if src.state == nil {
			return usageError{fmt.Errorf("--in-place needs a regular file; %s is not one", displayPath(in.path))}
		}
		res, err := host.AppendCarrying(*src.state, block, carryFor(in.Format), 0)
		if res.Outcome != "" {
			rep.WriteBack = &writeBackReport{Outcome: res.Outcome, AgentLines: res.AgentLines, CarriedBytes: res.CarriedBytes, Appends: res.Appends}
		}
		if err != nil {
			return err
		}
		return a.rememberAppend(in.path, in.Format, res.Undo)
	}
	out := o.output
	if out == "" {
		if in.path == "-" {
			out = "-"
		} else {
			out = in.path[:len(in.path)-len(filepath.Ext(in.path))] + ".compacted.jsonl"
		}
	}
	rep.Output = out
	whole := func(w io.Writer) error {
		if _, err := w.Write(src.data); err != nil {
			return err
		}
		_, err := w.Write(block)
		return err
	}
	if out == "-" {
		rep.Output = "stdout"
		return whole(a.g.io.Out)
	}
	if err := atomicfile.Write(out, 0o644, whole); err != nil {
		return err
	}
	if len(block) == 0 {
		return nil
	}
	return a.rememberAppend(out, in.Format, host.AppendedTo(sha256.Sum256(src.data), int64(len(src.data)), block))
}

// writeBackReport says how a compaction went into the agent's file with
// --in-place: "appended" right after the lines read; "carried" when the
// agent wrote lines while it was appended, which were carried after it;
// "rolled_back" when they could not be, and the compaction was taken out
// again (exit 7); "unresolved" when it could not be taken out either,
// since the agent wrote after it too (exit 7, the message says where).
type writeBackReport struct {
	Outcome      string `json:"outcome"`
	AgentLines   int    `json:"agent_lines"`
	CarriedBytes int64  `json:"carried_bytes"`
	Appends      int    `json:"appends"`
}

// String is the report's line for people.
func (w *writeBackReport) String() string {
	lines := fmt.Sprintf("%d lines", w.AgentLines)
	if w.AgentLines == 1 {
		lines = "1 line"
	}
	switch w.Outcome {
	case host.OutcomeCarried:
		return fmt.Sprintf("the agent wrote %s while the compaction was appended; carried after it (%d appends, %s bytes)", lines, w.Appends, num(int(w.CarriedBytes)))
	case host.OutcomeRolledBack:
		return fmt.Sprintf("the agent wrote %s while the compaction was appended; the compaction was taken back", lines)
	case host.OutcomeUnresolved:
		return fmt.Sprintf("the agent wrote %s while the compaction was appended, and after it; the compaction stays", lines)
	}
	return ""
}

// carryFor is how lines an agent wrote while a compaction was appended
// to its file are carried after it, in the file's format.
func carryFor(format string) host.CarryFunc {
	var c *formats.Carrier
	var runs []formats.Landed
	return func(tail []host.Landed) ([]byte, error) {
		if c == nil {
			var err error
			if c, err = formats.NewCarrier(format); err != nil {
				return nil, err
			}
		}
		for _, l := range tail[len(runs):] {
			runs = append(runs, formats.Landed{Data: l.Data, Ours: l.Ours, Unseen: l.Unseen})
		}
		return c.Carry(runs)
	}
}

// writeBackBlock is the agent's records of the latest compaction: its
// summary message as the context shows it, the first message kept, the
// pinned messages before it. Nil when the session was not compacted.
func writeBackBlock(s *host.Session, data []byte, rep *compactReport, path string) ([]byte, error) {
	cs := s.Compactions()
	if len(cs) == 0 {
		return nil, nil
	}
	c := cs[len(cs)-1]
	wb := formats.WriteBack{PreTokens: rep.TokensBefore, Trigger: "manual"}
	view := s.Context()
	for _, m := range view {
		if m.Summary {
			for _, b := range m.Content {
				if b.Type == abi.BlockText {
					wb.Summary += b.Text
				}
			}
			break
		}
	}
	msgs := s.Messages()
	folded := slices.IndexFunc(msgs, func(m host.Message) bool { return m.ID == c.FoldedThrough })
	if folded < 0 {
		return nil, fmt.Errorf("compaction %s folds through %q, which the session does not hold", c.ID, c.FoldedThrough)
	}
	if folded+1 < len(msgs) {
		wb.FirstKeptID = msgs[folded+1].ID
	}
	// Tool results the gate shortened after the compaction go back
	// shortened, so the agent's context is the one reported.
	kept := msgs[folded+1:]
	if len(view) >= len(kept) {
		for i, v := range view[len(view)-len(kept):] {
			for j, b := range v.Content {
				if b.Type == abi.BlockToolResult && j < len(kept[i].Content) && b.Text != kept[i].Content[j].Text {
					if wb.Shortened == nil {
						wb.Shortened = map[string]string{}
					}
					wb.Shortened[b.ToolUseID] = b.Text
				}
			}
		}
	}
	for _, m := range msgs[:folded+1] {
		if m.Pinned {
			wb.PinnedIDs = append(wb.PinnedIDs, m.ID)
		}
	}
	block, err := formats.AppendCompaction(data, wb)
	switch {
	case errors.Is(err, formats.ErrTornLine):
		return nil, fmt.Errorf("%s: %w: its last line is not complete yet, so an agent is probably writing it; close the agent, or retry when it is idle", displayPath(path), host.ErrLogChanged)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", displayPath(path), err)
	}
	return block, nil
}

// undoRecord is what undo needs to take an appended compaction away. The
// records of one file live in a small JSON file under the cache dir, named
// by the hash of the file's absolute path: the agent's own file gets no
// field it does not write.
type undoRecord struct {
	Path    string    `json:"path"`
	Records []undoRec `json:"records"`
}

type undoRec struct {
	Format       string    `json:"format"`
	Offset       int64     `json:"offset"`
	Length       int64     `json:"length"`
	PrefixSHA256 string    `json:"prefix_sha256"`
	BlockSHA256  string    `json:"block_sha256"`
	Time         time.Time `json:"time"`
}

// undoDir is where undo records live: <cache dir>/writeback.
func (a *app) undoDir() (string, error) {
	dir := a.cfg.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no cache dir to remember the compaction in for undo (%v); set cache_dir in the config or COMPACT_HOST_CACHE_DIR", err)
		}
		dir = filepath.Join(base, "compact-host")
	}
	return filepath.Join(dir, "writeback"), nil
}

func (a *app) undoFile(path string) (string, string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	dir, err := a.undoDir()
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(dir, hex.EncodeToString(sum[:16])+".json"), abs, nil
}

// loadUndo reads the undo records of path; none is not an error.
func (a *app) loadUndo(path string) (string, *undoRecord, error) {
	file, abs, err := a.undoFile(path)
	if err != nil {
		return "", nil, err
	}
	rec := &undoRecord{Path: abs}
	data, err := os.ReadFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return file, rec, nil
	case err != nil:
		return "", nil, err
	}
	if err := json.Unmarshal(data, rec); err != nil || rec.Path != abs {
		return file, &undoRecord{Path: abs}, nil // unreadable or another file's: start over
	}
	return file, rec, nil
}

func saveUndo(file string, rec *undoRecord) error {
	if len(rec.Records) == 0 {
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(file, 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rec)
	})
}

// rememberAppend adds an appended block to path's undo records. A file
// rewritten since (its records no longer describe its prefix) starts a
// new list.
func (a *app) rememberAppend(path, format string, ap host.Appended) error {
	file, rec, err := a.loadUndo(path)
	if err != nil {
		return fmt.Errorf("the compaction was written to %s, but undo will not know it: %w", path, err)
	}
	if n := len(rec.Records); n > 0 && rec.Records[n-1].Offset+rec.Records[n-1].Length != ap.Offset {
		rec.Records = nil
	}
	rec.Records = append(rec.Records, undoRec{Format: format, Offset: ap.Offset, Length: ap.Len,
		PrefixSHA256: hex.EncodeToString(ap.Prefix[:]), BlockSHA256: hex.EncodeToString(ap.Block[:]), Time: time.Now().UTC()})
	if err := saveUndo(file, rec); err != nil {
		return fmt.Errorf("the compaction was written to %s, but undo will not know it: %w", path, err)
	}
	return nil
}

// undoAppended takes the latest compaction written back into path away:
// the file is cut back to what it was before, if it is still exactly what
// was written (exit 7 otherwise, nothing changed). ok is false when no
// compaction written by compact-host is on record for path.
func (a *app) undoAppended(path string) (rec undoRec, left int, ok bool, err error) {
	file, recs, err := a.loadUndo(path)
	if err != nil {
		return undoRec{}, 0, false, err
	}
	n := len(recs.Records)
	if n == 0 {
		return undoRec{}, 0, false, nil
	}
	rec = recs.Records[n-1]
	ap := host.Appended{Offset: rec.Offset, Len: rec.Length}
	if !decodeSum(rec.PrefixSHA256, &ap.Prefix) || !decodeSum(rec.BlockSHA256, &ap.Block) {
		return rec, 0, true, fmt.Errorf("%s: the undo record is damaged; nothing was changed", file)
	}
	if err := host.TruncateIfUnchanged(path, ap, 0); err != nil {
		return rec, 0, true, err
	}
	recs.Records = recs.Records[:n-1]
	if err := saveUndo(file, recs); err != nil {
		return rec, n - 1, true, fmt.Errorf("the compaction was undone, but its record in %s was not removed: %w", file, err)
	}
	return rec, n - 1, true, nil
}

func decodeSum(s string, dst *[sha256.Size]byte) bool {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return false
	}
	copy(dst[:], b)
	return true
}
