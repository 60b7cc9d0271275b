package host

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/tokens"
)

// Plan is what a compaction would do, worked out without doing it.
type Plan struct {
	// FirstKept is the index (into Messages) of the first message kept
	// verbatim; FirstKeptID its ID.
	FirstKept   int    `json:"first_kept"`
	FirstKeptID string `json:"first_kept_id"`
	// Folded is the number of messages the summary would stand for
	// (pinned ones are kept, not folded); Kept the messages kept verbatim.
	Folded int `json:"folded"`
	Kept   int `json:"kept"`
	// TurnPrefix is true when the cut falls inside a turn, whose start is
	// then summarized on its own.
	TurnPrefix bool `json:"turn_prefix"`
	// TokensBefore is the calibrated context now; TokensKept the part kept
	// verbatim, to which the summary (about SummaryTokens, the size asked
	// for this fold) is added.
	TokensBefore  int `json:"tokens_before"`
	TokensKept    int `json:"tokens_kept"`
	SummaryTokens int `json:"summary_tokens"`
	// FileOps are the files the summary is asked to carry.
	FileOps abi.FileOps `json:"file_ops"`
}

// Plan works out what Compact would fold, without calling any strategy.
func (e *Engine) Plan(s *Session, opts CompactOptions) (Plan, error) {
	keep := e.cfg.KeepRecentTokens
	if opts.KeepRecentTokens > 0 {
		keep = opts.KeepRecentTokens
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := e.makePlan(s, keep)
	if err != nil {
		return Plan{}, err
	}
	kept := len(s.msgs) - p.cut
	return Plan{
		FirstKept: p.cut, FirstKeptID: idAt(s, p.cut), Folded: p.folded, Kept: kept,
		TurnPrefix: p.prefixLen > 0, TokensBefore: e.calibrated(s.contextTokens()),
		TokensKept:    e.calibrated(s.cum[len(s.msgs)] - s.cum[p.cut]),
		SummaryTokens: e.cfg.summaryTarget(int(e.budget.Load())-max(opts.Overhead, 0), s.foldableTokens(p.start, p.cut)),
		FileOps:       p.files,
	}, nil
}

func idAt(s *Session, i int) string {
	if i < len(s.msgs) {
		return s.msgs[i].msg.ID
	}
	return ""
}

// RoleTokens is the calibrated estimate of the context by role, and of
// tool results apart.
type RoleTokens struct {
	System      int `json:"system"`
	User        int `json:"user"`
	Assistant   int `json:"assistant"`
	ToolResults int `json:"tool_results"`
	Summary     int `json:"summary"`
}

// ToolOutput is one tool result and its size.
type ToolOutput struct {
	MessageID string `json:"message_id"`
	Tool      string `json:"tool"`
	Tokens    int    `json:"tokens"`
	Bytes     int    `json:"bytes"`
}

// Breakdown is what Inspect reports of a session's context.
type Breakdown struct {
	Tokens   int          `json:"tokens"`
	ByRole   RoleTokens   `json:"by_role"`
	Largest  []ToolOutput `json:"largest"`
	Messages int          `json:"messages"`
	// CrossedPrune, CrossedCompact and CrossedEmergency are the indexes of
	// the messages at which the whole history, replayed without any
	// compaction, first crossed each threshold; -1 if it never did.
	CrossedPrune     int `json:"crossed_prune"`
	CrossedCompact   int `json:"crossed_compact"`
	CrossedEmergency int `json:"crossed_emergency"`
}

// Inspect breaks the session's context down by role and lists its n
// largest tool outputs.
func (e *Engine) Inspect(s *Session, n int) Breakdown {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctxMsgs := s.contextLocked()
	b := Breakdown{Tokens: e.calibrated(s.contextTokens()), Messages: len(ctxMsgs), CrossedPrune: -1, CrossedCompact: -1, CrossedEmergency: -1}
	names := map[string]string{}
	for i := range ctxMsgs {
		m := &ctxMsgs[i]
		for bi := range m.Content {
			blk := &m.Content[bi]
			t := e.calibrated(tokensOfBlock(s, blk))
			switch {
			case blk.Type == abi.BlockToolUse:
				names[blk.ID] = blk.Name
				b.ByRole.Assistant += t
			case blk.Type == abi.BlockToolResult:
				b.ByRole.ToolResults += t
				b.Largest = append(b.Largest, ToolOutput{MessageID: m.ID, Tool: names[blk.ToolUseID], Tokens: t, Bytes: len(blk.Text)})
			case m.Summary:
				b.ByRole.Summary += t
			case m.Role == abi.RoleSystem:
				b.ByRole.System += t
			case m.Role == abi.RoleUser:
				b.ByRole.User += t
			default:
				b.ByRole.Assistant += t
			}
		}
	}
	sort.SliceStable(b.Largest, func(i, j int) bool { return b.Largest[i].Tokens > b.Largest[j].Tokens })
	if len(b.Largest) > n {
		b.Largest = b.Largest[:n]
	}
	budget := float64(e.budget.Load())
	e.mu.Lock()
	calib := e.calib
	e.mu.Unlock()
	for i := 1; i <= len(s.msgs); i++ {
		used := float64(calib.Apply(s.cum[i]))
		if b.CrossedPrune < 0 && used >= e.cfg.pruneAt*budget {
			b.CrossedPrune = i - 1
		}
		if b.CrossedCompact < 0 && used >= e.cfg.compactAt*budget {
			b.CrossedCompact = i - 1
		}
		if b.CrossedEmergency < 0 && used >= e.cfg.emergencyAt*budget {
			b.CrossedEmergency = i - 1
		}
	}
	return b
}

func tokensOfBlock(s *Session, b *Block) int {
	return tokens.Block(s.counter, b)
}

// WriteLog writes the session as a log: every message, the prunes made to
// it, and the active compactions. Reading it back with OpenSession or
// LoadSession gives the same context.
func (s *Session) WriteLog(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range s.msgs {
		st := &s.msgs[i]
		if err := enc.Encode(Entry{Type: EntryMessage, Message: &st.msg}); err != nil {
			return fmt.Errorf("host: write log: %w", err)
		}
		keys := make([]int, 0, len(st.pruned))
		for bi := range st.pruned {
			keys = append(keys, bi)
		}
		sort.Ints(keys)
		for _, bi := range keys {
			if err := enc.Encode(Entry{Type: EntryPrune, Prune: &Prune{MessageID: st.msg.ID, Block: bi, Text: st.pruned[bi]}}); err != nil {
				return fmt.Errorf("host: write log: %w", err)
			}
		}
	}
	for _, ci := range s.active {
		c := s.compactions[ci]
		if err := enc.Encode(Entry{Type: EntryCompaction, Compaction: &c}); err != nil {
			return fmt.Errorf("host: write log: %w", err)
		}
	}
	return nil
}
