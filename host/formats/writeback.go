package formats

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// WriteBack is a compaction to record in an agent's own session file, in
// the terms of the Session read from it.
type WriteBack struct {
	// Summary is the text of the summary message the conversation
	// continues from, as the agent will see it.
	Summary string
	// FirstKeptID is the ID of the first message of Session.Messages kept
	// verbatim after the summary; "" when nothing is kept.
	FirstKeptID string
	// PinnedIDs are messages before FirstKeptID kept too (the agent's
	// instructions); Codex replays them before the summary.
	PinnedIDs []string
	// Trigger is what Claude Code records as the compaction's trigger;
	// "" means "manual".
	Trigger string
	// PreTokens is the context size before the compaction, in tokens.
	PreTokens int
	// Time is when the compaction was made; the zero value means now.
	// Records are never dated before the last line of the file.
	Time time.Time
	// Shortened are the kept tool results the engine shortened after the
	// compaction, by tool_use ID: the copies carry the shortened text, so
	// the agent sees what the engine counted.
	Shortened map[string]string
}

// ErrNotWritable: AppendCompaction was given a file it cannot record a
// compaction in (not a Claude Code session or a Codex rollout, or one
// whose messages do not map back to its lines).
var ErrNotWritable = errors.New("formats: cannot record a compaction in this file")

// WritableFormats are the formats AppendCompaction writes.
var WritableFormats = []string{ClaudeCode, Codex}

// AppendCompaction returns the lines to append to data, a Claude Code
// session or a Codex rollout, so that the agent resumes from wb the way it
// resumes from a compaction of its own: Claude Code gets a compact_boundary
// line, the summary as its compact-summary user line and copies of the
// kept lines chained after it; Codex gets a compacted record whose
// replacement history is the pinned items, the summary and the kept items,
// and the context_compacted event it writes after one. Every field the
// agent's own records carry is taken from the lines of data (session id,
// cwd, version, branch, window ids, turn id) or from wb; nothing the agent
// would misread is made up. Read gives back what the agent will see:
// Session.Live is the summary and the kept messages.
//
// data must end with a complete line: a last line cut short (an agent is
// writing it) is refused, the error wraps ErrTornLine. A complete last
// line without its newline gets one at the start of the block.
func AppendCompaction(data []byte, wb WriteBack) ([]byte, error) {
	var lead []byte
	if len(data) > 0 && data[len(data)-1] != '\n' {
		last := data[bytes.LastIndexByte(data, '\n')+1:]
		if !json.Valid(last) {
			return nil, fmt.Errorf("%w: %w: the last line is not complete yet (an agent may be writing it)", ErrNotWritable, ErrTornLine)
		}
		lead = []byte("\n")
	}
	format, err := Detect(data[:min(len(data), detectSize)])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotWritable, err)
	}
	s := &Session{Format: format, Skipped: map[string]int{}, Repaired: map[string]int{}}
	tr := &sourceLines{first: map[string]int{}}
	br := bufio.NewReader(bytes.NewReader(data))
	switch format {
	case ClaudeCode:
		err = readClaudeCodeTracked(br, s, tr)
	case Codex:
		err = readCodexTracked(br, s, tr)
	default:
		return nil, fmt.Errorf("%w: it is %s; compactions are written into Claude Code sessions and Codex rollouts", ErrNotWritable, describeFormat(format))
	}
	if err != nil {
		return nil, err
	}
	lines := splitLines(data)
	start := len(lines) + 1
	var repl []json.RawMessage // kept items of the latest compacted record
	var replPinned []json.RawMessage
	if tr.repl != nil {
		// The pinned items of the replacement (the developer instructions
		// Codex keeps there) are replayed wherever the cut falls: before
		// the first item kept from it, or anywhere after it.
		k, inRepl := tr.repl.first[wb.FirstKeptID]
		inRepl = inRepl && wb.FirstKeptID != ""
		var pinnedAt []int
		for _, id := range wb.PinnedIDs {
			if j, ok := tr.repl.first[id]; ok && (!inRepl || j < k) {
				pinnedAt = append(pinnedAt, j)
			}
		}
		if inRepl || len(pinnedAt) > 0 {
			var c struct {
				History []json.RawMessage `json:"replacement_history"`
			}
			if err := json.Unmarshal(mustPayload(lines[tr.repl.line-1]), &c); err != nil || k > len(c.History) || slices.Max(append(pinnedAt, 0)) > len(c.History) {
				return nil, fmt.Errorf("%w: line %d, a compacted record, cannot be read again", ErrNotWritable, tr.repl.line)
			}
			for _, j := range pinnedAt {
				replPinned = append(replPinned, c.History[j-1])
			}
			if inRepl {
				// Kept from an item of the replacement: the items after it
				// and every item written since.
				repl, start = c.History[k-1:], tr.repl.line+1
			}
		}
	}
	if wb.FirstKeptID != "" && repl == nil {
		n, ok := tr.first[wb.FirstKeptID]
		if !ok {
			return nil, fmt.Errorf("%w: message %q, the first one kept, comes from no line of the file", ErrNotWritable, wb.FirstKeptID)
		}
		start = n
	}
	// Kept from a copy (the live context after a compaction), the lines
	// after it are the copies and what came since; kept from an original
	// line (the full history), the copies repeat lines already kept.
	var kept []int
	fromCopy := tr.copies[start]
	for _, n := range tr.items {
		if n >= start && (fromCopy || !tr.copies[n]) {
			kept = append(kept, n)
		}
	}
	isItem := make(map[int]bool, len(tr.items))
	for _, n := range tr.items {
		isItem[n] = true
	}
	var pinned []int
	for _, id := range wb.PinnedIDs {
		// Only conversation items are replayed; Codex sends its base
		// instructions (session_meta) itself.
		if n, ok := tr.first[id]; ok && n < start && isItem[n] {
			pinned = append(pinned, n)
		}
	}
	if wb.Trigger == "" {
		wb.Trigger = "manual"
	}
	short := make(map[string]string, len(wb.Shortened))
	for id, text := range wb.Shortened {
		short[id] = text
	}
	wb.Shortened = short
	var block []byte
	if format == ClaudeCode {
		block, err = claudeCodeBlock(lines, kept, wb)
	} else {
		var pinnedP, keptP []json.RawMessage
		if pinnedP, err = payloadsOf(lines, pinned, replPinned); err == nil {
			if keptP, err = payloadsOf(lines, kept, repl); err == nil {
				block, err = codexBlock(lines, pinnedP, keptP, wb)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if len(short) > 0 {
		ids := make([]string, 0, len(short))
		for id := range short {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		return nil, fmt.Errorf("%w: shortened tool results %s are in no kept line", ErrNotWritable, strings.Join(ids, ", "))
	}
	// The block names what it was appended to, so that it can be taken
	// away from the file alone (FindAppended).
	if block, err = markBlock(format, data, block); err != nil {
		return nil, err
	}
	return append(lead, block...), nil
}

// shortenResults returns the object spanning v in b with the value of
// member field of each element of its array member list (an item with
// call ID member idKey) replaced by the shortened text short holds for
// it; every other byte is kept. The IDs done are deleted from short.
func shortenResults(b []byte, v span, list, idKey, field string, short map[string]string) ([]byte, error) {
	ms, err := objectMembers(b, v)
	if err != nil {
		return nil, err
	}
	m := find(ms, list)
	if m == nil || b[m.val.start] != '[' {
		return b[v.start:v.end], nil
	}
	elems, err := arrayElems(b, m.val)
	if err != nil {
		return nil, err
	}
	var ps []patch
	for _, e := range elems {
		if obj, ok, err := shortenOne(b, e, idKey, field, short); err != nil {
			return nil, err
		} else if ok {
			ps = append(ps, patch{span{e.start - v.start, e.end - v.start}, obj})
		}
	}
	return applyPatches(b[v.start:v.end], ps), nil
}

// shortenOne sets member field of the object spanning e in b to the text
// short holds for its member idKey, if any.
func shortenOne(b []byte, e span, idKey, field string, short map[string]string) ([]byte, bool, error) {
	if b[e.start] != '{' {
		return nil, false, nil
	}
	var ref map[string]json.RawMessage
	if json.Unmarshal(b[e.start:e.end], &ref) != nil {
		return nil, false, nil
	}
	var id string
	if json.Unmarshal(ref[idKey], &id) != nil {
		return nil, false, nil
	}
	text, ok := short[id]
	if !ok {
		return nil, false, nil
	}
	obj, err := setMembers(b, e, nil, map[string][]byte{field: quoted(text)})
	if err != nil {
		return nil, false, err
	}
	delete(short, id)
	return obj, true, nil
}

// sourceLines records where messages come from: the 1-based line that
// opened each message (by ID, before normalization), and the lines that
// carry conversation items, in order. Its methods do nothing on nil.
type sourceLines struct {
	first map[string]int
	items []int
	// copies are the items that copy a kept line after a compaction.
	copies map[int]bool
	// repl is where the messages of a Codex rollout's latest compacted
	// record come from, nil when it has none.
	repl *replSource
}

// replSource maps the messages of a compacted record's replacement
// history to its items: first holds the 1-based index of the item that
// opened each message, by ID; line is the record's line.
type replSource struct {
	line  int
	first map[string]int
}

// copied records line as an item that copies a kept line.
func (t *sourceLines) copied(line int) {
	if t != nil {
		t.item(line)
		if t.copies == nil {
			t.copies = map[int]bool{}
		}
		t.copies[line] = true
	}
}

func (t *sourceLines) open(id string, line int) {
	if t != nil {
		if _, seen := t.first[id]; !seen {
			t.first[id] = line
		}
	}
}

func (t *sourceLines) item(line int) {
	if t != nil && (len(t.items) == 0 || t.items[len(t.items)-1] != line) {
		t.items = append(t.items, line)
	}
}

// splitLines returns the lines of data without line endings, numbered as
// readJSONL numbers them (lines[0] is line 1).
func splitLines(data []byte) [][]byte {
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	for i, l := range lines {
		lines[i] = bytes.TrimRight(l, "\r")
	}
	return lines
}

// copyUUID is the uuid of the copy of line orig kept after the compact
// summary named summary. Deriving it lets the reader tell copies from new
// messages without a field Claude Code does not write.
func copyUUID(summary, orig string) string {
	h := sha256.Sum256([]byte("compact-host copy\x00" + summary + "\x00" + orig))
	return uuidFrom(h[:16], 4)
}

// uuidFrom formats 16 bytes as an RFC 9562 UUID of the given version.
func uuidFrom(b []byte, version byte) string {
	var u [16]byte
	copy(u[:], b)
	u[6] = u[6]&0x0f | version<<4
	u[8] = u[8]&0x3f | 0x80
	x := hex.EncodeToString(u[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// randomUUID is a version 4 UUID, as the agents make.
func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return uuidFrom(b[:], 4)
}

// uuidV7 is a version 7 UUID for time t (Codex's window ids), its other
// bits from seed.
func uuidV7(t time.Time, seed []byte) string {
	var b [16]byte
	copy(b[:], seed)
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(b[:6], ms[2:])
	return uuidFrom(b[:], 7)
}

// stamp formats t as both agents date their lines.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// recordTime is when the appended records are dated: wb.Time (or now),
// but never before the last dated line, so the agent sees them as newest.
func recordTime(wb WriteBack, last time.Time) time.Time {
	t := wb.Time
	if t.IsZero() {
		t = time.Now()
	}
	t = t.UTC().Truncate(time.Millisecond)
	if !last.IsZero() && !t.After(last) {
		t = last.Add(time.Millisecond)
	}
	return t
}

// ccMeta are the fields Claude Code repeats on every line of a session.
type ccMeta struct {
	UserType  string `json:"userType"`
	CWD       string `json:"cwd"`
	SessionID string `json:"sessionId"`
	Version   string `json:"version"`
	GitBranch string `json:"gitBranch"`
	Slug      string `json:"slug"`
}

// ccBoundary and ccSummary are the two records of a Claude Code
// compaction, their fields in Claude Code's order.
type ccBoundary struct {
	ParentUUID        *string `json:"parentUuid"`
	LogicalParentUUID string  `json:"logicalParentUuid,omitempty"`
	IsSidechain       bool    `json:"isSidechain"`
	UserType          string  `json:"userType,omitempty"`
	CWD               string  `json:"cwd,omitempty"`
	SessionID         string  `json:"sessionId,omitempty"`
	Version           string  `json:"version,omitempty"`
	GitBranch         string  `json:"gitBranch,omitempty"`
	Slug              string  `json:"slug,omitempty"`
	Type              string  `json:"type"`
	Subtype           string  `json:"subtype"`
	Content           string  `json:"content"`
	IsMeta            bool    `json:"isMeta"`
	Timestamp         string  `json:"timestamp"`
	UUID              string  `json:"uuid"`
	Level             string  `json:"level"`
	CompactMetadata   struct {
		Trigger   string `json:"trigger"`
		PreTokens int    `json:"preTokens"`
	} `json:"compactMetadata"`
}

type ccSummary struct {
	ParentUUID  string `json:"parentUuid"`
	IsSidechain bool   `json:"isSidechain"`
	UserType    string `json:"userType,omitempty"`
	CWD         string `json:"cwd,omitempty"`
	SessionID   string `json:"sessionId,omitempty"`
	Version     string `json:"version,omitempty"`
	GitBranch   string `json:"gitBranch,omitempty"`
	Slug        string `json:"slug,omitempty"`
	Type        string `json:"type"`
	Message     struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	IsVisibleInTranscriptOnly bool   `json:"isVisibleInTranscriptOnly"`
	IsCompactSummary          bool   `json:"isCompactSummary"`
	UUID                      string `json:"uuid"`
	Timestamp                 string `json:"timestamp"`
}

// claudeCodeBlock writes the boundary, the summary and the kept lines.
// The boundary starts a new chain (parentUuid null) and names the last
// message as its logical parent, as Claude Code's own does; the copies get
// uuids derived from the summary's, parentUuids chaining them after it,
// timestamps after it (so their last is the newest leaf Claude Code
// resumes from), their tool results' sourceToolAssistantUUID pointed at
// the copied assistant line, and a message.id of their own, so that no
// loader joins them with the originals before the boundary.
func claudeCodeBlock(lines [][]byte, kept []int, wb WriteBack) ([]byte, error) {
	var meta ccMeta
	var lastMsg string
	var last time.Time
	for _, l := range lines {
		var rec struct {
			ccMeta
			Type        string `json:"type"`
			UUID        string `json:"uuid"`
			IsSidechain bool   `json:"isSidechain"`
			Timestamp   string `json:"timestamp"`
		}
		if len(bytes.TrimSpace(l)) == 0 || json.Unmarshal(l, &rec) != nil {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, rec.Timestamp); err == nil && t.After(last) {
			last = t
		}
		if rec.IsSidechain {
			continue
		}
		for _, f := range []struct {
			dst *string
			v   string
		}{{&meta.UserType, rec.UserType}, {&meta.CWD, rec.CWD}, {&meta.SessionID, rec.SessionID},
			{&meta.Version, rec.Version}, {&meta.GitBranch, rec.GitBranch}, {&meta.Slug, rec.Slug}} {
			if f.v != "" {
				*f.dst = f.v
			}
		}
		switch rec.Type {
		case "user", "assistant", "system":
			if rec.UUID != "" {
				lastMsg = rec.UUID
			}
		}
	}
	if meta.SessionID == "" {
		return nil, fmt.Errorf("%w: no line of the session names its sessionId", ErrNotWritable)
	}
	t := recordTime(wb, last)
	b := ccBoundary{LogicalParentUUID: lastMsg, UserType: meta.UserType, CWD: meta.CWD, SessionID: meta.SessionID,
		Version: meta.Version, GitBranch: meta.GitBranch, Slug: meta.Slug, Type: "system", Subtype: "compact_boundary",
		Content: "Conversation compacted", Timestamp: stamp(t), UUID: randomUUID(), Level: "info"}
	b.CompactMetadata.Trigger, b.CompactMetadata.PreTokens = wb.Trigger, wb.PreTokens
	sum := ccSummary{ParentUUID: b.UUID, UserType: meta.UserType, CWD: meta.CWD, SessionID: meta.SessionID,
		Version: meta.Version, GitBranch: meta.GitBranch, Slug: meta.Slug, Type: "user",
		IsVisibleInTranscriptOnly: true, IsCompactSummary: true, UUID: randomUUID(), Timestamp: stamp(t.Add(time.Millisecond))}
	sum.Message.Role, sum.Message.Content = "user", wb.Summary
	var out bytes.Buffer
	for _, v := range []any{b, sum} {
		line, err := marshal(v)
		if err != nil {
			return nil, err
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	cp := ccCopier{summary: sum.UUID, parent: sum.UUID, copied: map[string]string{}, short: wb.Shortened}
	for k, n := range kept {
		line, err := cp.copy(lines[n-1], t.Add(time.Duration(k+2)*time.Millisecond))
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrNotWritable, n, err)
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// ccCopier copies Claude Code message lines after a compact summary,
// each chained after the one before.
type ccCopier struct {
	summary string            // the compact summary's uuid
	parent  string            // the uuid the next copy chains after
	copied  map[string]string // copy uuids by original uuid
	short   map[string]string // shortened tool results, by tool_use ID
}

// copy returns the copy of line l dated t: its uuid derived from the
// summary's and its own, chained after the copy before, its tool results'
// sourceToolAssistantUUID pointed at a copied line, its message.id
// suffixed with the summary's.
func (c *ccCopier) copy(l []byte, t time.Time) ([]byte, error) {
	var rec struct {
		UUID                    string `json:"uuid"`
		SourceToolAssistantUUID string `json:"sourceToolAssistantUUID"`
		Message                 struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	if err := json.Unmarshal(l, &rec); err != nil || rec.UUID == "" {
		return nil, errors.New("a kept message has no uuid")
	}
	uuid := copyUUID(c.summary, rec.UUID)
	c.copied[rec.UUID] = uuid
	set := map[string][]byte{
		"uuid":       quoted(uuid),
		"parentUuid": quoted(c.parent),
		"timestamp":  quoted(stamp(t)),
	}
	if cp, ok := c.copied[rec.SourceToolAssistantUUID]; ok {
		set["sourceToolAssistantUUID"] = quoted(cp)
	}
	if msg, err := copiedMessage(l, rec.Message.ID, "-"+c.summary[:8], c.short); err != nil {
		return nil, err
	} else if msg != nil {
		set["message"] = msg
	}
	line, err := setMembers(l, span{0, len(l)}, nil, set)
	if err != nil {
		return nil, err
	}
	c.parent = uuid
	return line, nil
}

// copiedMessage returns the message object of a copied line: its id given
// suffix, its shortened tool results replaced; nil when nothing changes.
func copiedMessage(line []byte, id, suffix string, short map[string]string) ([]byte, error) {
	ms, err := objectMembers(line, span{0, len(line)})
	if err != nil {
		return nil, err
	}
	m := find(ms, "message")
	if m == nil || line[m.val.start] != '{' {
		return nil, nil
	}
	msg := line[m.val.start:m.val.end]
	if len(short) > 0 {
		if msg, err = shortenResults(line, m.val, "content", "tool_use_id", "content", short); err != nil {
			return nil, err
		}
	}
	if id != "" {
		if msg, err = setMembers(msg, span{0, len(msg)}, nil, map[string][]byte{"id": quoted(id + suffix)}); err != nil {
			return nil, err
		}
	}
	if bytes.Equal(msg, line[m.val.start:m.val.end]) {
		return nil, nil
	}
	return msg, nil
}

func quoted(s string) []byte {
	b, _ := marshal(s)
	return b
}

// payloadsOf is first, then the payloads of the rollout's lines ns.
func payloadsOf(lines [][]byte, ns []int, first []json.RawMessage) ([]json.RawMessage, error) {
	out := append([]json.RawMessage(nil), first...)
	for _, n := range ns {
		p := mustPayload(lines[n-1])
		if p == nil {
			return nil, fmt.Errorf("%w: line %d, a kept item, has no payload", ErrNotWritable, n)
		}
		out = append(out, p)
	}
	return out, nil
}

// codexBlock writes the compacted record and the context_compacted event.
// The replacement history is the pinned items and the kept items as the
// rollout has them, byte for byte, with the summary between them as a user
// message; its turn id and the window fields continue those of the
// rollout.
func codexBlock(lines [][]byte, pinned, kept []json.RawMessage, wb WriteBack) ([]byte, error) {
	var last time.Time
	var sessionStart time.Time
	var sessionID string
	var passthrough json.RawMessage
	var win struct {
		Number   int    `json:"window_number"`
		First    string `json:"first_window_id"`
		WindowID string `json:"window_id"`
	}
	for _, l := range lines {
		var rec struct {
			Timestamp string `json:"timestamp"`
			Type      string `json:"type"`
			Payload   struct {
				ID          string          `json:"id"`
				Timestamp   string          `json:"timestamp"`
				Passthrough json.RawMessage `json:"internal_chat_message_metadata_passthrough"`
				TurnID      string          `json:"turn_id"`
			} `json:"payload"`
		}
		if len(bytes.TrimSpace(l)) == 0 || json.Unmarshal(l, &rec) != nil {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, rec.Timestamp); err == nil && t.After(last) {
			last = t
		}
		switch rec.Type {
		case "session_meta":
			sessionID = rec.Payload.ID
			sessionStart, _ = time.Parse(time.RFC3339Nano, rec.Payload.Timestamp)
		case "response_item":
			if len(rec.Payload.Passthrough) > 0 {
				passthrough = rec.Payload.Passthrough
			}
		case "turn_context":
			if rec.Payload.TurnID != "" {
				passthrough, _ = marshal(map[string]string{"turn_id": rec.Payload.TurnID})
			}
		case "compacted":
			_ = json.Unmarshal(mustPayload(l), &win)
		}
	}
	t := recordTime(wb, last)
	seed := sha256.Sum256([]byte("compact-host window\x00" + sessionID + "\x00" + strconv.Itoa(win.Number)))
	previous := win.WindowID
	if previous == "" {
		// The first window's id is never written to the rollout; one is
		// made for the session's start, the same on every run.
		if sessionStart.IsZero() {
			sessionStart = t
		}
		previous = uuidV7(sessionStart, seed[:])
		win.First = previous
	}
	var random [16]byte
	_, _ = rand.Read(random[:])

	hist := make([]json.RawMessage, 0, len(pinned)+1+len(kept))
	for _, p := range append(append([]json.RawMessage(nil), pinned...), kept...) {
		if len(hist) == len(pinned) {
			hist = append(hist, nil) // the summary's place
		}
		var kind struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(p, &kind)
		if len(wb.Shortened) > 0 && strings.HasSuffix(kind.Type, "_output") {
			if short, ok, err := shortenOne(p, span{0, len(p)}, "call_id", "output", wb.Shortened); err != nil {
				return nil, fmt.Errorf("%w: a kept item: %v", ErrNotWritable, err)
			} else if ok {
				p = short
			}
		}
		hist = append(hist, p)
	}
	if len(hist) == len(pinned) {
		hist = append(hist, nil)
	}
	summary := struct {
		Type        string          `json:"type"`
		Role        string          `json:"role"`
		Content     []oaTextPart    `json:"content"`
		Passthrough json.RawMessage `json:"internal_chat_message_metadata_passthrough,omitempty"`
	}{"message", "user", []oaTextPart{{"input_text", wb.Summary}}, passthrough}
	sb, err := marshal(summary)
	if err != nil {
		return nil, err
	}
	hist[len(pinned)] = sb
	rec := codexCompactedLine{Timestamp: stamp(t), Type: "compacted"}
	p := &rec.Payload
	p.Message, p.ReplacementHistory = wb.Summary, hist
	p.WindowNumber, p.FirstWindowID, p.PreviousWindowID, p.WindowID = win.Number+1, win.First, previous, uuidV7(t, random[:])
	return codexRecords(rec, t)
}

// codexCompactedLine is a rollout's compacted record, its fields in
// Codex's order.
type codexCompactedLine struct {
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Payload   struct {
		Message            string            `json:"message"`
		ReplacementHistory []json.RawMessage `json:"replacement_history"`
		WindowNumber       int               `json:"window_number"`
		FirstWindowID      string            `json:"first_window_id"`
		PreviousWindowID   string            `json:"previous_window_id"`
		WindowID           string            `json:"window_id"`
	} `json:"payload"`
}

// codexRecords are the compacted record rec, dated t, and the
// context_compacted event Codex writes after one.
func codexRecords(rec codexCompactedLine, t time.Time) ([]byte, error) {
	event := struct {
		Timestamp string            `json:"timestamp"`
		Type      string            `json:"type"`
		Payload   map[string]string `json:"payload"`
	}{stamp(t.Add(time.Millisecond)), "event_msg", map[string]string{"type": "context_compacted"}}
	var out bytes.Buffer
	for _, v := range []any{rec, event} {
		line, err := marshal(v)
		if err != nil {
			return nil, err
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

type oaTextPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// mustPayload is the raw payload of a rollout line, or nil.
func mustPayload(line []byte) json.RawMessage {
	var l codexLine
	if json.Unmarshal(line, &l) != nil {
		return nil
	}
	return l.Payload
}

// Landed is a run of the bytes an agent's file holds after the offset a
// compaction was made from (host.Landed): our appends, the first of them
// the block AppendCompaction returned, and the lines the agent appended
// meanwhile. Unseen marks the agent's lines that landed before one of our
// appends without having been read when it was made.
type Landed struct {
	Data   []byte
	Ours   bool
	Unseen bool
}

// ErrCannotCarry: lines an agent wrote before a compaction's block cannot
// be carried after it (the agent compacted itself meanwhile, or wrote a
// line that is not one of its records).
var ErrCannotCarry = errors.New("formats: cannot carry the agent's lines after the compaction")

// A Carrier makes the records that carry the lines an agent wrote while
// a compaction was appended to its file into the conversation it
// continues (Session.Live), in the order it wrote them.
//
// Claude Code: copies of the message lines that landed before the block
// are chained after its last line, as the kept lines are; lines after the
// block are read after the compaction already. Codex: a compaction
// replaces everything before it, so when lines landed unseen before our
// latest compacted record, a new one follows whose replacement history is
// the block's and every item the agent wrote since, in order.
//
// A Carrier is called again as the tail grows (host.AppendCarrying): it
// reads each run of the agent's once, so a carry is made again in the
// time of a copy of the block, not of a parse of it.
type Carrier struct {
	format string
	read   int       // the runs of the tail read so far
	newest time.Time // the latest timestamp of the block and the agent's lines
	items  []byte    // Codex: the agent's items read so far, each after a comma
	// history is the block's compacted record from its timestamp's
	// closing quote to the end of its replacement history.
	history []byte
	err     error // what made the lines impossible to carry
}

// NewCarrier returns the Carrier of a file of format (ClaudeCode or
// Codex).
func NewCarrier(format string) (*Carrier, error) {
	if format != ClaudeCode && format != Codex {
		return nil, fmt.Errorf("%w: it is %s", ErrNotWritable, describeFormat(format))
	}
	return &Carrier{format: format}, nil
}

// Carry returns the records to append to the file whose tail after the
// bytes a compaction was made from is tail, its first run of ours the
// compaction's block; nil when no line of the agent's is hidden. Each
// call's tail extends the one before.
func (c *Carrier) Carry(tail []Landed) ([]byte, error) {
	first, last, ours := -1, -1, 0
	for i, r := range tail {
		if r.Ours {
			if first < 0 {
				first = i
			}
			last, ours = i, ours+1
		}
	}
	if first < 0 {
		return nil, nil
	}
	if c.format == ClaudeCode {
		if first == 0 || ours > 1 {
			return nil, nil // nothing landed before the block, or it was carried
		}
		return c.claudeCode(tail[:first], tail[first].Data)
	}
	if !c.codexHidden(tail[:last]) {
		return nil, nil // every item before our latest record is in it
	}
	for ; c.read < len(tail); c.read++ {
		if r := tail[c.read]; !r.Ours {
			c.codexItems(r.Data)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	return c.codex(tail[first].Data, tail[last].Data)
}

// agentLines are the lines of an agent's run, without empty ones; a run
// that does not end with a complete line is refused.
func agentLines(run []byte) ([][]byte, error) {
	if len(run) > 0 && run[len(run)-1] != '\n' {
		return nil, fmt.Errorf("%w: the agent's last line before the compaction is incomplete", ErrCannotCarry)
	}
	var out [][]byte
	for _, l := range splitLines(run) {
		if len(bytes.TrimSpace(l)) > 0 {
			out = append(out, l)
		}
	}
	return out, nil
}

// later keeps t in c.newest if it is later.
func (c *Carrier) later(ts string) {
	if t, err := time.Parse(time.RFC3339Nano, ts); err == nil && t.After(c.newest) {
		c.newest = t
	}
}

func (c *Carrier) claudeCode(before []Landed, block []byte) ([]byte, error) {
	var hidden [][]byte
	for _, r := range before {
		lines, err := agentLines(r.Data)
		if err != nil {
			return nil, err
		}
		hidden = append(hidden, lines...)
	}
	cp := ccCopier{copied: map[string]string{}}
	inBlock := map[string]bool{}
	for _, l := range splitLines(block) {
		var rec struct {
			UUID             string `json:"uuid"`
			IsCompactSummary bool   `json:"isCompactSummary"`
			Timestamp        string `json:"timestamp"`
		}
		if json.Unmarshal(l, &rec) != nil || rec.UUID == "" {
			continue
		}
		if rec.IsCompactSummary {
			cp.summary = rec.UUID
		}
		cp.parent, inBlock[rec.UUID] = rec.UUID, true
		c.later(rec.Timestamp)
	}
	if len(cp.summary) < 8 {
		return nil, fmt.Errorf("%w: the block holds no compact summary", ErrCannotCarry)
	}
	type ccLine struct {
		Type                    string `json:"type"`
		Subtype                 string `json:"subtype"`
		UUID                    string `json:"uuid"`
		IsSidechain             bool   `json:"isSidechain"`
		IsCompactSummary        bool   `json:"isCompactSummary"`
		SourceToolAssistantUUID string `json:"sourceToolAssistantUUID"`
		Timestamp               string `json:"timestamp"`
	}
	recs := make([]ccLine, len(hidden))
	for i, l := range hidden {
		if err := json.Unmarshal(l, &recs[i]); err != nil {
			return nil, fmt.Errorf("%w: a line the agent wrote is not JSON: %v", ErrCannotCarry, err)
		}
		c.later(recs[i].Timestamp)
	}
	var out bytes.Buffer
	for i, l := range hidden {
		rec := recs[i]
		switch {
		case rec.Subtype == "compact_boundary" || rec.IsCompactSummary:
			return nil, fmt.Errorf("%w: the agent compacted the conversation itself meanwhile", ErrCannotCarry)
		case rec.Type != "user" && rec.Type != "assistant" || rec.IsSidechain:
			continue // not in the conversation sent to the model
		}
		// A tool result may come from a kept line, whose copy's uuid is
		// derived from it.
		if s := rec.SourceToolAssistantUUID; s != "" && cp.copied[s] == "" && inBlock[copyUUID(cp.summary, s)] {
			cp.copied[s] = copyUUID(cp.summary, s)
		}
		c.newest = c.newest.Add(time.Millisecond)
		line, err := cp.copy(l, c.newest)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCannotCarry, err)
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	if out.Len() == 0 {
		return nil, nil
	}
	return out.Bytes(), nil
}

// codexHidden reports whether the agent's runs that landed unseen right
// before our latest record hold an item of the history, or a record that
// changes it: Codex writes many events that are not in the history, and
// they need no carry.
func (c *Carrier) codexHidden(before []Landed) bool {
	for i := len(before) - 1; i >= 0 && !before[i].Ours && before[i].Unseen; i-- {
		for _, l := range splitLines(before[i].Data) {
			var rec struct {
				Type string `json:"type"`
			}
			if len(bytes.TrimSpace(l)) > 0 && (json.Unmarshal(l, &rec) != nil || rec.Type == "response_item" || rec.Type == "compacted") {
				return true
			}
		}
	}
	return false
}

// codexItems reads the response items of one of the agent's runs.
func (c *Carrier) codexItems(run []byte) {
	lines, err := agentLines(run)
	if err != nil {
		c.err = err
		return
	}
	for _, l := range lines {
		var rec struct {
			codexLine
			Timestamp string `json:"timestamp"`
		}
		if err := json.Unmarshal(l, &rec); err != nil {
			c.err = fmt.Errorf("%w: a line the agent wrote is not JSON: %v", ErrCannotCarry, err)
			return
		}
		c.later(rec.Timestamp)
		switch rec.Type {
		case "compacted":
			c.err = fmt.Errorf("%w: the agent compacted the conversation itself meanwhile", ErrCannotCarry)
			return
		case "response_item":
			c.items = append(append(c.items, ','), bytes.TrimSpace(rec.Payload)...)
		}
	}
}

// The compacted records this package writes (codexCompactedLine) end
// with the window fields, right after the replacement history.
var (
	compactedStart = []byte(`{"timestamp":"`)
	windowFields   = []byte(`],"window_number":`)
)

// codex writes a compacted record whose replacement history is the
// block's and the agent's items, and whose window follows the latest
// record's. Both records were written by codexRecords, so they are cut
// where their fields are rather than parsed: the history can be large.
func (c *Carrier) codex(block, latest []byte) ([]byte, error) {
	if c.history == nil {
		rec, _ := firstLine(block)
		head, ok := bytes.CutPrefix(rec, compactedStart)
		stampEnd, cut := bytes.IndexByte(head, '"'), bytes.LastIndex(head, windowFields)
		if !ok || stampEnd < 0 || cut < stampEnd {
			return nil, fmt.Errorf("%w: the block holds no compacted record", ErrCannotCarry)
		}
		c.later(string(head[:stampEnd]))
		c.history = head[stampEnd:cut] // from the timestamp's closing quote to the history's last item
	}
	history, items := c.history, c.items
	if bytes.HasSuffix(history, []byte("[")) {
		items = items[min(1, len(items)):] // the history was empty: no comma before the first
	}
	lrec, ok := firstLine(latest)
	var win struct {
		WindowNumber  int    `json:"window_number"`
		FirstWindowID string `json:"first_window_id"`
		WindowID      string `json:"window_id"`
	}
	at := bytes.LastIndex(lrec, windowFields)
	if !ok || at < 0 || json.Unmarshal(append([]byte(`{"window_number":`), bytes.TrimSuffix(lrec[at+len(windowFields):], []byte("}"))...), &win) != nil {
		return nil, fmt.Errorf("%w: our latest record holds no window", ErrCannotCarry)
	}
	t := c.newest.Add(time.Millisecond)
	var random [16]byte
	_, _ = rand.Read(random[:])
	window, err := marshal(struct {
		WindowNumber     int    `json:"window_number"`
		FirstWindowID    string `json:"first_window_id"`
		PreviousWindowID string `json:"previous_window_id"`
		WindowID         string `json:"window_id"`
	}{win.WindowNumber + 1, win.FirstWindowID, win.WindowID, uuidV7(t, random[:])})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Grow(len(history) + len(items) + 256)
	out.Write(compactedStart)
	out.WriteString(stamp(t))
	out.Write(history)
	out.Write(items)
	out.WriteString("],")
	out.Write(window[1:]) // the window's members, and the payload's closing brace
	out.WriteString("}\n")
	event, err := marshal(struct {
		Timestamp string            `json:"timestamp"`
		Type      string            `json:"type"`
		Payload   map[string]string `json:"payload"`
	}{stamp(t.Add(time.Millisecond)), "event_msg", map[string]string{"type": "context_compacted"}})
	if err != nil {
		return nil, err
	}
	out.Write(event)
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// firstLine is the first non-empty line of b.
func firstLine(b []byte) ([]byte, bool) {
	for _, l := range splitLines(b) {
		if len(bytes.TrimSpace(l)) > 0 {
			return l, true
		}
	}
	return nil, false
}
