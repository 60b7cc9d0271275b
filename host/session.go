package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/jsondecode"
	"github.com/compact-host/compact-host/host/internal/jsonl"
	"github.com/compact-host/compact-host/host/internal/jsonscan"
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
	// ErrInvalidUTF8: a log line, or a message to be logged, holds bytes
	// that are not UTF-8 (or an unpaired \u surrogate escape). JSON
	// decoding and encoding would turn them into U+FFFD, so the content
	// would change without a word; it is refused instead.
	ErrInvalidUTF8 = errors.New("host: text is not valid UTF-8")
	// ErrBadUsage: a message's usage report holds a negative or absurd
	// token count; it would derail calibration.
	ErrBadUsage = errors.New("host: implausible usage numbers")
	// ErrSessionTooLarge: a session log is over the engine's size limit
	// (WithMaxSessionBytes).
	ErrSessionTooLarge = errors.New("host: session log over the size limit")
	// ErrNotRegularFile: a session log path names a device, FIFO or
	// directory, which could be read forever.
	ErrNotRegularFile = errors.New("host: session log is not a regular file")
	// ErrLogBusy: another writer held the session log's lock too long.
	// Retrying later is safe.
	ErrLogBusy = jsonl.ErrLockTimeout
	// ErrLogChanged: the session log was replaced, shortened, or left
	// with a line another program is still writing. Reopen the session.
	ErrLogChanged = jsonl.ErrChanged
)

// LineError is a session log line that could not be replayed: it names the
// file and 1-based line, and wraps the reason (ErrBadEntry, ErrInvalidUTF8,
// ErrBadUsage, ErrDuplicateID).
type LineError = jsonl.LineError

// ConflictError is a compaction refused at commit because another writer
// appended a compaction or an undo to the log after this session read it.
// It wraps ErrConcurrentCompaction. Nothing was written; running the
// compaction again builds on the other writer's.
type ConflictError struct {
	Path  string
	Line  int    // the other writer's entry
	Entry string // what it is: "compaction c2", "undo of c1"
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("host: %s:%d: another writer appended %s while this compaction ran, so it was not saved; run it again to build on that one", e.Path, e.Line, e.Entry)
}

func (e *ConflictError) Unwrap() error { return ErrConcurrentCompaction }

// DefaultMaxSessionBytes is the largest session log read unless
// WithMaxSessionBytes says otherwise.
const DefaultMaxSessionBytes = 1 << 30

// WithMaxSessionBytes sets the largest session log OpenSession,
// LoadSession and ReadSession read, in bytes. n <= 0 keeps the default,
// DefaultMaxSessionBytes (1 GiB).
func WithMaxSessionBytes(n int64) Option { return func(e *Engine) { e.maxSessionBytes = n } }

// maxUsageTokens bounds each usage count: 2^40 tokens is far beyond any
// context window and any bill, and keeps sums far from overflow.
const maxUsageTokens = 1 << 40

// msgState is one message and what the engine keeps about it.
type msgState struct {
	msg    Message
	tokens int // estimate of the message as the view shows it (prunes applied)
	// pruned holds replacement text of tool_result blocks by block index.
	pruned map[int]string
	// fileSeq is the count of file operations recorded before the
	// message's own: fileOps.before(fileSeq+1) is the state before it.
	fileSeq int
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
	// replaying defers prefix sums while lines are replayed; cumStale says
	// a prune changed a message's estimate meanwhile.
	replaying, cumStale bool
	// foreign is the latest compaction or undo another writer appended
	// since the session was loaded: what a refused compaction names.
	foreign *ConflictError

	// Gate state.
	lastEstimate  int  // raw estimate of the last check, input for calibration
	lastOverhead  int  // schema and dynamic tokens of the last check
	checked       bool // a check happened since the last usage report
	forceCompact  bool // an overflow was seen; compact at the next check
	backoffUntil  int  // after a compaction that freed little: the cum[len(msgs)] to reach before the next; 0 if none
	overflowRetry bool // a retry after overflow is in flight
}

func newSession(id string, counter tokens.Counter) *Session {
	return &Session{id: id, counter: counter, index: map[string]int{}, open: map[string]int{}, cum: []int{0}, files: newFileOps(nil)}
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
	if len(msgs) > 1 {
		// One allocation for the batch, not a doubling every few messages.
		s.msgs = slices.Grow(s.msgs, len(msgs))
		s.cum = slices.Grow(s.cum, len(msgs))
		s.cutOK = slices.Grow(s.cutOK, len(msgs))
		if len(s.index) == 0 {
			s.index = make(map[string]int, len(msgs)) // no rehashing as it fills
		}
	}
	for i := range msgs {
		if err := s.appendLocked(msgs[i], true); err != nil {
			return err
		}
	}
	return nil
}

func (s *Session) appendLocked(m Message, persist bool) error {
	if err := checkUsage(m.Usage); err != nil {
		if m.ID != "" {
			return fmt.Errorf("message %q: %w", m.ID, err)
		}
		return err
	}
	if persist && s.log != nil && !s.log.Held() {
		// What other writers appended comes first, and IDs are given
		// after it is known.
		if err := s.lockLog(); err != nil {
			return err
		}
		defer s.unlockLog()
	}
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
		// A copy for the encoder: m itself stays on the stack.
		logged := m
		if err := s.writeEntry(Entry{Type: EntryMessage, Message: &logged}); err != nil {
			return err
		}
	}
	i := len(s.msgs)
	s.index[m.ID] = i
	if n, ok := generatedID(m.ID); ok && n > s.nextID {
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
	s.msgs[i].fileSeq = s.files.seq
	s.files.observe(&m)
	return nil
}

// generatedID is n for an ID of the form the session gives, "m<n>". It
// checks the form before strconv.Atoi, whose error for every other ID (a
// UUID, a provider's ID) costs an allocation per message.
func generatedID(id string) (int, bool) {
	if len(id) < 2 || id[0] != 'm' {
		return 0, false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; c < '0' || c > '9' {
			if i > 1 || (c != '+' && c != '-') {
				return 0, false
			}
		}
	}
	n, err := strconv.Atoi(id[1:])
	return n, err == nil
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

// maxRequestWalk bounds how many messages foldedRequest reads back past
// harness text and command output, so a session of thousands of task
// notifications plans in the same time as any other.
const maxRequestWalk = 64

// foldedRequest is the text of the user's latest request (abi.RequestText:
// harness text and command output sent as user messages are none) when it
// lies before cut and is not pinned: the request a summary of the messages
// before cut must keep. It is empty when that request stays in the context.
func (s *Session) foldedRequest(cut int) string {
	for k, n := len(s.requests)-1, 0; k >= 0 && n < maxRequestWalk; k, n = k-1, n+1 {
		i := s.requests[k]
		if s.isObservation(i) {
			continue
		}
		m := &s.msgs[i].msg
		t, ok := abi.RequestText(*m)
		if !ok {
			continue
		}
		if i >= cut || m.Pinned {
			return ""
		}
		return t
	}
	return ""
}

// isObservation reports whether message i is command output sent back as
// a user message (abi.IsObservation), judged after message i-1.
func (s *Session) isObservation(i int) bool {
	var prev *Message
	if i > 0 {
		prev = &s.msgs[i-1].msg
	}
	return abi.IsObservation(prev, &s.msgs[i].msg)
}

func (s *Session) writeEntry(e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("host: encode %s entry: %w", e.Type, err)
	}
	if invalidUTF8(line, -1) >= 0 || bytes.Contains(line, []byte(`\ufffd`)) && encodedReplacement(line) {
		return fmt.Errorf("host: %s entry not logged: %w (it would be written as U+FFFD); pass the text as UTF-8", e.Type, ErrInvalidUTF8)
	}
	if !s.log.Held() {
		if err := s.lockLog(); err != nil {
			return err
		}
		defer s.unlockLog()
	}
	return s.log.Append(line)
}

// lockLog takes the log's lock and replays what other writers appended
// since the session last read or wrote it. Callers hold s.mu.
func (s *Session) lockLog() error {
	if s.log == nil {
		return nil
	}
	s.replaying = true
	err := s.log.Lock()
	s.endReplay()
	return err
}

func (s *Session) unlockLog() {
	if s.log != nil {
		s.log.Unlock()
	}
}

// refresh replays what other writers appended, so a plan starts from the
// log as it is. Callers hold s.mu.
func (s *Session) refresh() error {
	err := s.lockLog()
	s.unlockLog()
	return err
}

// conflict is the error of a compaction whose session changed under it.
func (s *Session) conflict() error {
	if s.foreign != nil {
		c := *s.foreign
		return &c
	}
	return ErrConcurrentCompaction
}

// endReplay brings the prefix sums up to date after lines were replayed:
// once, not once per prune.
func (s *Session) endReplay() {
	s.replaying = false
	if !s.cumStale {
		return
	}
	s.cumStale = false
	for i := range s.msgs {
		s.cum[i+1] = s.cum[i] + s.msgs[i].tokens
	}
}

// checkUsage refuses token counts no provider reports.
func checkUsage(u *Usage) error {
	if u == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"input_tokens", u.InputTokens}, {"output_tokens", u.OutputTokens}, {"cache_read_tokens", u.CacheReadTokens}, {"cache_write_tokens", u.CacheWriteTokens}} {
		if f.n < 0 || f.n > maxUsageTokens {
			return fmt.Errorf("%w: %s is %d, outside 0 to 2^40", ErrBadUsage, f.name, f.n)
		}
	}
	return nil
}

// invalidUTF8 is the offset in a JSON line of the first byte that is not
// UTF-8 or of an unpaired \u surrogate escape, or -1. encoding/json would
// read either as U+FFFD. flags are what jsonscan.String found in all the
// strings of the line, ORed (jsondecode.DecodeFlags), or -1 if unknown:
// a line of JSON whose strings are ASCII is ASCII, and one without
// surrogate escapes has no unpaired one.
func invalidUTF8(line []byte, flags int) int {
	if (flags < 0 || flags&jsonscan.NonASCII != 0) && !utf8.Valid(line) {
		for i := 0; i < len(line); {
			r, n := utf8.DecodeRune(line[i:])
			if r == utf8.RuneError && n == 1 {
				return i
			}
			i += n
		}
	}
	if flags >= 0 && flags&jsonscan.Surrogate == 0 || !bytes.Contains(line, []byte(`\u`)) {
		return -1 // no surrogate escape
	}
	for i := 0; i < len(line); i++ {
		j := bytes.IndexByte(line[i:], '\\')
		if j < 0 {
			break
		}
		i += j
		if i+1 >= len(line) || line[i+1] != 'u' {
			i++ // an escaped character; skip it
			continue
		}
		r := jsonscan.Hex4(line[i+2:])
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if i+12 <= len(line) && line[i+6] == '\\' && line[i+7] == 'u' {
				if r2 := jsonscan.Hex4(line[i+8:]); r2 >= 0xDC00 && r2 < 0xE000 {
					i += 11
					continue
				}
			}
			return i
		case r >= 0xDC00 && r < 0xE000:
			return i
		}
		i += 5
	}
	return -1
}

// encodedReplacement reports whether encoding/json wrote a \ufffd escape
// in line: it does so only for bytes that were not UTF-8, since a real
// U+FFFD is written as itself.
func encodedReplacement(line []byte) bool {
	for i := 0; ; {
		j := bytes.Index(line[i:], []byte(`\ufffd`))
		if j < 0 {
			return false
		}
		i += j
		backslashes := 0
		for k := i - 1; k >= 0 && line[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return true
		}
		i++
	}
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
	// Undo what the log holds now, not what it held when it was read.
	if err := s.lockLog(); err != nil {
		return Compaction{}, err
	}
	defer s.unlockLog()
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
	if s.replaying {
		s.cumStale = true // endReplay sums once
		return
	}
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

// OpenSession opens the session log at path, creating it if needed, and
// replays it. A torn last line (a crash mid-append) is moved aside and
// reported by Session.Torn; everything before it loads. A bad complete
// line is a *LineError naming the file and line. Only a regular file of
// at most the engine's size limit (WithMaxSessionBytes) is read.
//
// Other processes may append to the same log: every write takes the log's
// exclusive lock, first replays what they appended, then appends at the
// real end of the file.
func (e *Engine) OpenSession(path string) (*Session, error) {
	return e.OpenSessionContext(context.Background(), path)
}

// OpenSessionContext is OpenSession, stopping the replay when ctx is done.
func (e *Engine) OpenSessionContext(ctx context.Context, path string) (*Session, error) {
	s := newSession(path, e.counter)
	s.files = newFileOps(&e.cfg.FileTools)
	s.replaying = true
	log, torn, err := jsonl.Open(ctx, path, e.logOptions(), s.replayLine)
	s.endReplay()
	if err != nil {
		return nil, e.sessionError("open", err)
	}
	log.Sync = e.cfg.SyncWrites
	s.log, s.torn = log, torn
	if torn != nil {
		e.log.Warn("session log had a torn last line", "path", path, "torn", torn.String())
	}
	return s, nil
}

// LoadSession replays the session log at path read-only, with the limits
// of OpenSession.
func (e *Engine) LoadSession(path string) (*Session, error) {
	s := newSession(path, e.counter)
	s.files = newFileOps(&e.cfg.FileTools)
	s.replaying = true
	torn, err := jsonl.Read(context.Background(), path, e.logOptions(), s.replayLine)
	s.endReplay()
	if err != nil {
		return nil, e.sessionError("load", err)
	}
	s.torn = torn
	return s, nil
}

// ReadSession replays a session log from r, read-only; name stands for it
// in errors ("name:LINE: ..."). A torn last line is reported by
// Session.Torn, as with LoadSession. At most the engine's size limit is
// read.
func (e *Engine) ReadSession(r io.Reader, name string) (*Session, error) {
	return e.ReadSessionContext(context.Background(), r, name)
}

// ReadSessionContext is ReadSession, stopping when ctx is done.
func (e *Engine) ReadSessionContext(ctx context.Context, r io.Reader, name string) (*Session, error) {
	s := newSession(name, e.counter)
	s.files = newFileOps(&e.cfg.FileTools)
	s.replaying = true
	torn, err := jsonl.ReadFrom(ctx, r, name, e.logOptions(), s.replayLine)
	s.endReplay()
	if err != nil {
		return nil, e.sessionError("load", err)
	}
	s.torn = torn
	return s, nil
}

func (e *Engine) logOptions() jsonl.Options {
	return jsonl.Options{MaxBytes: e.maxBytes()}
}

func (e *Engine) maxBytes() int64 {
	if e.maxSessionBytes > 0 {
		return e.maxSessionBytes
	}
	return DefaultMaxSessionBytes
}

// sessionError adds the host's sentinels and the fix to a log error.
func (e *Engine) sessionError(op string, err error) error {
	switch {
	case errors.Is(err, jsonl.ErrTooLarge):
		return fmt.Errorf("host: %s session: %w: %w; raise the limit (%d bytes) with host.WithMaxSessionBytes", op, ErrSessionTooLarge, err, e.maxBytes())
	case errors.Is(err, jsonl.ErrNotRegular):
		return fmt.Errorf("host: %s session: %w: %w; give the path of a session log file", op, ErrNotRegularFile, err)
	}
	return fmt.Errorf("host: %s session: %w", op, err)
}

// replayLine applies one log line: while a session loads, and for lines
// other writers appended, before each write.
func (s *Session) replayLine(line []byte, lineno int) error {
	// The decode says what the line's strings hold, so the check for
	// what it would have read as U+FFFD reads only lines that may hold it
	// (and lines it could not decode, whose error comes second).
	var ent Entry
	flags, err := jsondecode.DecodeFlags(line, &ent)
	if at := invalidUTF8(line, flags); at >= 0 {
		return fmt.Errorf("%w: %w at byte %d of the line; JSON decoding would turn it into U+FFFD, so nothing was read (fix or remove the line)", ErrBadEntry, ErrInvalidUTF8, at+1)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadEntry, err)
	}
	switch ent.Type {
	case EntryMessage:
		if ent.Message == nil {
			return fmt.Errorf("%w: message entry without a message", ErrBadEntry)
		}
		if err := s.appendLocked(*ent.Message, false); err != nil {
			return fmt.Errorf("%w: %w", ErrBadEntry, err)
		}
		return nil
	case EntryCompaction:
		if ent.Compaction == nil {
			return fmt.Errorf("%w: compaction entry without a compaction", ErrBadEntry)
		}
		if err := s.applyCompaction(*ent.Compaction); err != nil {
			return err
		}
		s.noteForeign(lineno, "compaction "+ent.Compaction.ID)
		return nil
	case EntryPrune:
		p := ent.Prune
		if p == nil {
			return fmt.Errorf("%w: prune entry without a prune", ErrBadEntry)
		}
		i, ok := s.index[p.MessageID]
		if !ok || p.Block < 0 || p.Block >= len(s.msgs[i].msg.Content) {
			return fmt.Errorf("%w: prune of unknown message %q block %d", ErrBadEntry, p.MessageID, p.Block)
		}
		s.applyPrune(i, p.Block, p.Text)
		return nil
	case EntryUndo:
		if ent.Undo == nil || len(s.active) == 0 || s.compactions[s.active[len(s.active)-1]].ID != ent.Undo.Compaction {
			return fmt.Errorf("%w: undo does not name the active compaction", ErrBadEntry)
		}
		s.active = s.active[:len(s.active)-1]
		s.rebuildView()
		s.noteForeign(lineno, "undo of "+ent.Undo.Compaction)
		return nil
	}
	return fmt.Errorf("%w: unknown entry type %q (want message, compaction, prune or undo)", ErrBadEntry, ent.Type)
}

// noteForeign remembers a compaction or undo another writer appended after
// the session was loaded (while loading, s.log is not set yet).
func (s *Session) noteForeign(lineno int, what string) {
	if s.log != nil {
		s.foreign = &ConflictError{Path: s.log.Path(), Line: lineno, Entry: what}
	}
}
