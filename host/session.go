package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/jsonl"
	"github.com/compact-host/compact-host/host/internal/tokens"
)

// Message, Block and Usage are the canonical session types of package abi.
type (
	Message = abi.Message
	Block   = abi.Block
	Usage   = abi.Usage
)

// Compaction is one compaction recorded in a session log.
type Compaction struct {
	ID string `json:"id"`
	// FoldedThrough is the ID of the last message the summary stands for;
	// every earlier message that is not pinned is folded too.
	FoldedThrough  string    `json:"folded_through"`
	Summary        string    `json:"summary"`
	Strategy       string    `json:"strategy"`
	Offline        bool      `json:"offline,omitempty"`
	Emergency      bool      `json:"emergency,omitempty"`
	Focus          string    `json:"focus,omitempty"`
	TokensBefore   int       `json:"tokens_before"`
	TokensAfter    int       `json:"tokens_after"`
	MessagesFolded int       `json:"messages_folded"`
	Time           time.Time `json:"time"`
}

// Prune records a tool result shortened in place. The original stays in
// the message entry; the view shows Text instead.
type Prune struct {
	MessageID string `json:"message_id"`
	Block     int    `json:"block"`
	Text      string `json:"text"`
}

// Undo records that a compaction was reverted.
type Undo struct {
	Compaction string `json:"compaction"`
}

// Entry is one line of a session log.
type Entry struct {
	Type       string      `json:"type"` // "message", "compaction", "prune" or "undo"
	Message    *Message    `json:"message,omitempty"`
	Compaction *Compaction `json:"compaction,omitempty"`
	Prune      *Prune      `json:"prune,omitempty"`
	Undo       *Undo       `json:"undo,omitempty"`
}

// Entry types.
const (
	EntryMessage    = "message"
	EntryCompaction = "compaction"
	EntryPrune      = "prune"
	EntryUndo       = "undo"
)

// Errors of session operations.
var (
	ErrDuplicateID   = errors.New("host: duplicate message id")
	ErrNothingToUndo = errors.New("host: no compaction to undo")
	ErrBadEntry      = errors.New("host: bad session entry")
)

// msgState is one message and what the engine keeps about it.
type msgState struct {
	msg    Message
	tokens int // estimate of the message as the view shows it (prunes applied)
	// pruned holds replacement text of tool_result blocks by block index.
	pruned map[int]string
	// files are the file operations of the message's tool calls.
	files []fileOp
}

// Session is a conversation and its compaction history. Its methods are
// safe for concurrent use; the engine serializes work on one session.
type Session struct {
	mu      sync.Mutex
	id      string
	log     *jsonl.Log
	counter tokens.Counter

	msgs  []msgState
	index map[string]int
	// cum[i] is the estimate of msgs[:i] as the view shows them.
	cum []int
	// cutOK[i] says whether the history may be cut before msgs[i]: no
	// tool call before i waits for a result at or after i.
	cutOK []bool
	open  map[string]int // unanswered tool_use id -> message index

	pinned []int // indexes of pinned messages, ascending
	// requests are the indexes of user messages that ask something (not
	// only tool results, not summaries), ascending.
	requests []int
	files    fileOps

	compactions []Compaction
	active      []int // indexes into compactions, oldest first
	// view caches what the active compaction puts before msgs[start:].
	viewStart        int
	viewPrefix       []Message
	viewPrefixTokens int

	nextID int
	torn   *jsonl.Torn

	// Gate state.
	lastEstimate  int  // raw estimate of the last check, input for calibration
	lastOverhead  int  // schema and dynamic tokens of the last check
	checked       bool // a check happened since the last usage report
	forceCompact  bool // an overflow was seen; compact at the next check
	suppressedAt  int  // message count when a compaction freed too little; -1 if none
	overflowRetry bool // a retry after overflow is in flight
}

func newSession(id string, counter tokens.Counter) *Session {
	return &Session{id: id, counter: counter, index: map[string]int{}, open: map[string]int{}, cum: []int{0}, suppressedAt: -1, files: newFileOps(nil)}
}

// ID identifies the session: its log path, or a generated name.
func (s *Session) ID() string { return s.id }

// Torn reports an incomplete last line found when the log was opened (its
// bytes were moved aside), or nil.
func (s *Session) Torn() *jsonl.Torn { return s.torn }

// Len is the number of messages ever appended, folded ones included.
func (s *Session) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msgs)
}

// Append adds messages at the end of the session, giving each without an
// ID a new one. An assistant message carrying Usage calibrates the token
// estimates of the engine that checked the context before the call.
func (s *Session) Append(msgs ...Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range msgs {
		if err := s.appendLocked(msgs[i], true); err != nil {
			return err
		}
	}
	return nil
}

func (s *Session) appendLocked(m Message, persist bool) error {
	if m.ID == "" {
		for {
			s.nextID++
			m.ID = "m" + strconv.Itoa(s.nextID)
			if _, taken := s.index[m.ID]; !taken {
				break
			}
		}
	} else if _, taken := s.index[m.ID]; taken {
		return fmt.Errorf("%w: %q", ErrDuplicateID, m.ID)
	}
	if persist && s.log != nil {
		if err := s.writeEntry(Entry{Type: EntryMessage, Message: &m}); err != nil {
			return err
		}
	}
	i := len(s.msgs)
	s.index[m.ID] = i
	if n, err := strconv.Atoi(strings.TrimPrefix(m.ID, "m")); err == nil && strings.HasPrefix(m.ID, "m") && n > s.nextID {
		s.nextID = n
	}
	st := msgState{msg: m, tokens: tokens.Message(s.counter, &m)}
	s.msgs = append(s.msgs, st)
	s.cum = append(s.cum, s.cum[i]+st.tokens)

	hasResult := false
	for _, b := range m.Content {
		if b.Type == abi.BlockToolResult {
			hasResult = true
		}
	}
	s.cutOK = append(s.cutOK, len(s.open) == 0 && !hasResult)
	for _, b := range m.Content {
		switch b.Type {
		case abi.BlockToolResult:
			delete(s.open, b.ToolUseID)
		case abi.BlockToolUse:
			if b.ID != "" {
				s.open[b.ID] = i
			}
		}
	}
	if m.Pinned {
		s.pinned = append(s.pinned, i)
	}
	if isRequest(&m) {
		s.requests = append(s.requests, i)
	}
	s.msgs[i].files = s.files.observe(&m)
	if s.suppressedAt >= 0 && i >= s.suppressedAt {
		s.suppressedAt = -1 // new content arrived
	}
	return nil
}

// isRequest reports whether m is a user message that asks for something:
// it has text or an image and is not a host summary.
func isRequest(m *Message) bool {
	if m.Role != abi.RoleUser || m.Summary {
		return false
	}
	for _, b := range m.Content {
		if (b.Type == abi.BlockText && strings.TrimSpace(b.Text) != "") || b.Type == abi.BlockImage {
			return true
		}
	}
	return false
}

// requestText is the text of a user request.
func requestText(m *Message) string {
	var parts []string
	for _, b := range m.Content {
		if b.Type == abi.BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.TrimSpace(strings.Join(parts, "\n"))
}

func (s *Session) writeEntry(e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("host: encode %s entry: %w", e.Type, err)
	}
	return s.log.Append(line)
}

// Context returns the messages the model should see now: pinned and
// summary messages standing for what was folded, then the kept messages,
// with pruned tool results shortened.
func (s *Session) Context() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.contextLocked()
}

func (s *Session) contextLocked() []Message {
	out := make([]Message, 0, len(s.viewPrefix)+len(s.msgs)-s.viewStart)
	out = append(out, s.viewPrefix...)
	for i := s.viewStart; i < len(s.msgs); i++ {
		out = append(out, s.viewOf(i))
	}
	return out
}

// viewOf is message i as the view shows it.
func (s *Session) viewOf(i int) Message {
	st := &s.msgs[i]
	if len(st.pruned) == 0 {
		return st.msg
	}
	m := st.msg
	m.Content = append([]Block(nil), m.Content...)
	for bi, text := range st.pruned {
		m.Content[bi].Text = text
	}
	return m
}

// contextTokens is the raw estimate of Context.
func (s *Session) contextTokens() int {
	return s.viewPrefixTokens + s.cum[len(s.msgs)] - s.cum[s.viewStart]
}

// ContextTokens is the uncalibrated estimate of Context.
func (s *Session) ContextTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.contextTokens()
}

// Messages returns every message ever appended, folded ones included, as
// they were appended.
func (s *Session) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.msgs))
	for i := range s.msgs {
		out[i] = s.msgs[i].msg
	}
	return out
}

// Compactions returns the active compactions, oldest first.
func (s *Session) Compactions() []Compaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Compaction, len(s.active))
	for i, ci := range s.active {
		out[i] = s.compactions[ci]
	}
	return out
}

// FileOps returns the files read and modified so far, across compactions.
func (s *Session) FileOps() abi.FileOps {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files.snapshot()
}

// Close closes the session's log.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return nil
	}
	err := s.log.Close()
	s.log = nil
	return err
}

// Undo reverts the latest active compaction: the messages it folded come
// back into the context exactly as they were. The undo is logged.
func (s *Session) Undo() (Compaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.active) == 0 {
		return Compaction{}, ErrNothingToUndo
	}
	c := s.compactions[s.active[len(s.active)-1]]
	if s.log != nil {
		if err := s.writeEntry(Entry{Type: EntryUndo, Undo: &Undo{Compaction: c.ID}}); err != nil {
			return Compaction{}, err
		}
	}
	s.active = s.active[:len(s.active)-1]
	s.rebuildView()
	return c, nil
}

// applyCompaction makes c the active compaction.
func (s *Session) applyCompaction(c Compaction) error {
	if _, ok := s.index[c.FoldedThrough]; !ok {
		return fmt.Errorf("%w: compaction %s folds through unknown message %q", ErrBadEntry, c.ID, c.FoldedThrough)
	}
	s.compactions = append(s.compactions, c)
	s.active = append(s.active, len(s.compactions)-1)
	s.rebuildView()
	return nil
}

// previousSummary is the summary of the active compaction, if any.
func (s *Session) previousSummary() string {
	if len(s.active) == 0 {
		return ""
	}
	return s.compactions[s.active[len(s.active)-1]].Summary
}

// rebuildView recomputes what stands before the kept messages.
func (s *Session) rebuildView() {
	s.viewStart, s.viewPrefix, s.viewPrefixTokens = 0, nil, 0
	if len(s.active) == 0 {
		return
	}
	c := s.compactions[s.active[len(s.active)-1]]
	s.viewStart = s.index[c.FoldedThrough] + 1
	s.viewPrefix = s.prefixFor(s.viewStart, c)
	for i := range s.viewPrefix {
		s.viewPrefixTokens += tokens.Message(s.counter, &s.viewPrefix[i])
	}
}

// prefixFor builds the messages that stand for msgs[:start] under c: pinned
// system messages, the summary, then the other pinned messages. Pinned
// messages lose their tool blocks, whose partners are folded.
func (s *Session) prefixFor(start int, c Compaction) []Message {
	var systems, others []Message
	for _, pi := range s.pinned {
		if pi >= start {
			break
		}
		m := s.viewOf(pi)
		kept := m.Content[:0:0]
		for _, b := range m.Content {
			if b.Type != abi.BlockToolUse && b.Type != abi.BlockToolResult {
				kept = append(kept, b)
			}
		}
		if len(kept) == 0 {
			continue
		}
		m.Content = kept
		if m.Role == abi.RoleSystem {
			systems = append(systems, m)
		} else {
			others = append(others, m)
		}
	}
	out := append(systems, summaryMessage(c))
	return append(out, others...)
}

// summaryMessage is the user message that stands for folded history.
func summaryMessage(c Compaction) Message {
	var head string
	if c.Emergency {
		head = fmt.Sprintf("[Context compacted in an emergency: %d earlier messages were dropped without a model summary.]\n\n", c.MessagesFolded)
	} else {
		head = fmt.Sprintf("[Context compacted: the summary below stands for %d earlier messages. The messages after it are verbatim.]\n\n", c.MessagesFolded)
	}
	return Message{ID: "summary-" + c.ID, Role: abi.RoleUser, Summary: true, Content: []Block{{Type: abi.BlockText, Text: head + c.Summary}}}
}

// applyPrune shortens tool_result block bi of message i to text.
func (s *Session) applyPrune(i, bi int, text string) {
	st := &s.msgs[i]
	if st.pruned == nil {
		st.pruned = map[int]string{}
	}
	st.pruned[bi] = text
	v := s.viewOf(i)
	delta := tokens.Message(s.counter, &v) - st.tokens
	st.tokens += delta
	for j := i + 1; j < len(s.cum); j++ {
		s.cum[j] += delta
	}
}

// IsSessionLog reports whether data is a session log of this package,
// whose compactions and prunes only the engine can replay: its first line
// is an entry {"type":"message","message":{...}} (or compaction, prune,
// undo). Other JSONL formats have "type" too, never with such a body.
func IsSessionLog(data []byte) bool {
	line := data
	if i := bytes.IndexByte(data[:min(len(data), 4<<20)], '\n'); i >= 0 {
		line = data[:i]
	}
	var entry map[string]json.RawMessage
	if json.Unmarshal(line, &entry) != nil {
		return false
	}
	var typ string
	if json.Unmarshal(entry["type"], &typ) != nil {
		return false
	}
	switch typ {
	case EntryMessage, EntryCompaction, EntryPrune, EntryUndo:
		body := bytes.TrimSpace(entry[typ])
		_, hasRole := entry["role"]
		return len(body) > 0 && body[0] == '{' && !hasRole
	}
	return false
}
