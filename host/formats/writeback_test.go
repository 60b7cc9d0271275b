package formats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// writableCorpus are the corpus sessions of the agents whose files take a
// compaction back.
var writableCorpus = []string{"claude-code-go-cli.jsonl", "claude-code-swift-app.jsonl", "codex-typescript.jsonl"}

// cutAt picks where a compaction of msgs may keep from: the first
// assistant message at or after from that follows a message with no open
// tool call (so no result is parted from its call), as the engine's cut
// would choose one.
func cutAt(t *testing.T, msgs []abi.Message, from int) int {
	t.Helper()
	for k := max(from, 1); k < len(msgs); k++ {
		if msgs[k].Role != abi.RoleAssistant || msgs[k-1].Role == abi.RoleAssistant {
			continue
		}
		results := false
		for _, b := range msgs[k-1].Content {
			results = results || b.Type == abi.BlockToolResult
		}
		if results || msgs[k-1].Role == abi.RoleUser {
			return k
		}
	}
	t.Fatalf("no cut point after message %d", from)
	return -1
}

// writeBackFor builds the WriteBack of a compaction keeping msgs[k:] and
// the leading pinned messages, as the command line builds it from the
// engine's compaction.
func writeBackFor(msgs []abi.Message, k int, summary string) WriteBack {
	wb := WriteBack{Summary: summary, PreTokens: 123456, Time: time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC)}
	if k < len(msgs) {
		wb.FirstKeptID = msgs[k].ID
	}
	for _, m := range msgs[:k] {
		if m.Pinned {
			wb.PinnedIDs = append(wb.PinnedIDs, m.ID)
		}
	}
	return wb
}

// view is what a model sees of msgs: roles, summary flags and content,
// without the IDs and usage a copy cannot keep.
func view(msgs []abi.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		c, _ := json.Marshal(m.Content)
		out[i] = fmt.Sprintf("%s summary=%v %s", m.Role, m.Summary, c)
	}
	return out
}

// expected is the conversation after a compaction keeping msgs[k:]: the
// pinned system messages, the summary, the kept messages.
func expected(msgs []abi.Message, k int, summary string) []abi.Message {
	var out []abi.Message
	for _, m := range msgs[:k] {
		if m.Pinned && m.Role == abi.RoleSystem {
			out = append(out, m)
		}
	}
	out = append(out, abi.Message{Role: abi.RoleUser, Summary: true, Content: []abi.Block{{Type: abi.BlockText, Text: summary}}})
	return append(out, msgs[k:]...)
}

func TestAppendCompactionRoundTrip(t *testing.T) {
	for _, name := range writableCorpus {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(corpusPath(t, name))
			require.NoError(t, err)
			orig, err := Read(bytes.NewReader(data), "")
			require.NoError(t, err)
			{
				k := cutAt(t, orig.Messages, len(orig.Messages)/2)
				summary := fmt.Sprintf("[Context compacted]\n\nsummary of the first %d messages of %s", k, name)
				block, err := AppendCompaction(data, writeBackFor(orig.Messages, k, summary))
				require.NoError(t, err)
				whole := append(append([]byte(nil), data...), block...)
				got, err := Read(bytes.NewReader(whole), "")
				require.NoError(t, err)

				// The original history reads as before; the compaction is
				// one more agent compaction, the last.
				assert.Equal(t, view(orig.Messages), view(got.Messages), "the messages before the compaction")
				require.Len(t, got.AgentCompactions, len(orig.AgentCompactions)+1)
				c := got.AgentCompactions[len(got.AgentCompactions)-1]
				assert.Equal(t, summary, c.Summary)
				assert.Equal(t, view(expected(orig.Messages, k, summary)), view(got.Live()), "summary and kept messages")
				assert.NoError(t, Validate(got.Live()), "the compacted conversation is valid")

				// A second compaction builds on the first: it copies
				// originals, never the copies.
				k2 := cutAt(t, got.Messages, max(k, len(got.Messages)-3))
				block2, err := AppendCompaction(whole, writeBackFor(got.Messages, k2, "second"))
				require.NoError(t, err)
				again, err := Read(bytes.NewReader(append(whole, block2...)), "")
				require.NoError(t, err)
				assert.Equal(t, view(expected(orig.Messages, k2, "second")), view(again.Live()))
				assert.Equal(t, view(orig.Messages), view(again.Messages))
			}
		})
	}
}

// Kept tool results the engine shortened after the compaction are
// written shortened: the agent sees what the engine counted.
func TestAppendCompactionShortened(t *testing.T) {
	for _, name := range writableCorpus {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(corpusPath(t, name))
			require.NoError(t, err)
			orig, err := Read(bytes.NewReader(data), "")
			require.NoError(t, err)
			k := cutAt(t, orig.Messages, len(orig.Messages)/2)
			want := expected(orig.Messages, k, "sum")
			wb := writeBackFor(orig.Messages, k, "sum")
			wb.Shortened = map[string]string{}
			shortened := 0
			for i := range want {
				m := &want[i]
				if m.Summary || shortened == 3 {
					continue
				}
				m.Content = append([]abi.Block(nil), m.Content...)
				for j, b := range m.Content {
					if b.Type == abi.BlockToolResult && shortened < 3 {
						text := fmt.Sprintf("[shortened %d: %d characters]", shortened, len(b.Text))
						m.Content[j].Text = text
						wb.Shortened[b.ToolUseID] = text
						shortened++
					}
				}
			}
			require.Equal(t, 3, shortened)
			block, err := AppendCompaction(data, wb)
			require.NoError(t, err)
			got, err := Read(bytes.NewReader(append(append([]byte(nil), data...), block...)), "")
			require.NoError(t, err)
			assert.Equal(t, view(want), view(got.Live()))

			wb.Shortened = map[string]string{"toolu_nowhere": "x"}
			_, err = AppendCompaction(data, wb)
			assert.ErrorIs(t, err, ErrNotWritable)
			assert.ErrorContains(t, err, "toolu_nowhere")
		})
	}
}

// The agent's own compactions read as they did: Claude Code's summary
// with the messages after it, Codex's replacement history.
func TestCompactedAgentOwn(t *testing.T) {
	s, err := ReadFile(corpusPath(t, "claude-code-swift-app.jsonl"))
	require.NoError(t, err)
	require.Len(t, s.AgentCompactions, 1)
	c := s.AgentCompactions[0]
	got := s.Live()
	require.Equal(t, 1+len(s.Messages)-c.FirstKept, len(got))
	assert.True(t, got[0].Summary)
	assert.Contains(t, got[0].Content[0].Text, "This session is being continued")
	assert.Equal(t, s.Messages[c.FirstKept:], got[1:])

	x, err := ReadFile(corpusPath(t, "codex-typescript.jsonl"))
	require.NoError(t, err)
	require.Len(t, x.AgentCompactions, 2)
	last := x.AgentCompactions[1]
	got = x.Live()
	require.NotEmpty(t, got)
	assert.Equal(t, abi.RoleSystem, got[0].Role, "the base instructions lead")
	assert.Equal(t, x.Messages[0], got[0])
	assert.Equal(t, 1+len(last.Replacement)+len(x.Messages)-last.FirstKept, len(got), "no summary message for an encrypted summary")

	plain, err := ReadFile(corpusPath(t, "claude-code-go-cli.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, plain.Messages, plain.Live())
}

// kind names the JSON type of a value.
func kind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0:
		return "none"
	case v[0] == '"':
		return "string"
	case v[0] == '{':
		return "object"
	case v[0] == '[':
		return "array"
	case v[0] == 't' || v[0] == 'f':
		return "bool"
	case v[0] == 'n':
		return "null"
	}
	return "number"
}

// shape is the keys of an object and the kinds of their values, nested
// objects one level down as "key.sub".
func shape(t *testing.T, raw []byte) map[string]string {
	t.Helper()
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &obj), "%s", raw)
	out := map[string]string{}
	for k, v := range obj {
		out[k] = kind(v)
		if kind(v) == "object" && k != "message" && k != "payload" && k != "toolUseResult" && k != "data" {
			var sub map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(v, &sub))
			for sk, sv := range sub {
				out[k+"."+sk] = kind(sv)
			}
		}
	}
	return out
}

// dropAppended checks that a record shape m has the member naming what
// the block was appended to, our only addition to the agent's record, and
// takes it out.
func dropAppended(t *testing.T, m map[string]string) {
	t.Helper()
	require.Equal(t, "object", m[appendedKey])
	for k := range m {
		if k == appendedKey || strings.HasPrefix(k, appendedKey+".") {
			delete(m, k)
		}
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ccKind is the record kind of a Claude Code line for the schema.
func ccKind(t *testing.T, line []byte) string {
	var r struct {
		Type             string `json:"type"`
		Subtype          string `json:"subtype"`
		IsCompactSummary bool   `json:"isCompactSummary"`
	}
	require.NoError(t, json.Unmarshal(line, &r))
	switch {
	case r.IsCompactSummary:
		return "user/compact-summary"
	case r.Subtype != "":
		return r.Type + "/" + r.Subtype
	}
	return r.Type
}

// schema is, per record kind, every key seen and the kinds of its values.
type schema map[string]map[string]map[string]bool

func (s schema) learn(kindOf string, sh map[string]string) {
	if s[kindOf] == nil {
		s[kindOf] = map[string]map[string]bool{}
	}
	for k, v := range sh {
		if s[kindOf][k] == nil {
			s[kindOf][k] = map[string]bool{}
		}
		s[kindOf][k][v] = true
	}
}

// check reports the keys of sh the schema has not seen for kindOf, or
// seen with another kind of value.
func (s schema) check(kindOf string, sh map[string]string) []string {
	var bad []string
	known, ok := s[kindOf]
	if !ok {
		return []string{"unknown record kind " + kindOf}
	}
	for k, v := range sh {
		if !known[k][v] {
			bad = append(bad, fmt.Sprintf("%s %s=%s", kindOf, k, v))
		}
	}
	sort.Strings(bad)
	return bad
}

// The records appended to a Claude Code session carry exactly the fields,
// with the same types, of Claude Code's own compaction in the corpus; the
// copies keep every field of the lines they copy; and every line of the
// file still fits the schema the corpus shows.
func TestAppendCompactionClaudeCodeShape(t *testing.T) {
	ref := map[string]map[string]string{}
	sc := schema{}
	for _, name := range []string{"claude-code-go-cli.jsonl", "claude-code-swift-app.jsonl"} {
		data, err := os.ReadFile(corpusPath(t, name))
		require.NoError(t, err)
		for _, l := range splitLines(data) {
			if len(bytes.TrimSpace(l)) == 0 {
				continue
			}
			k, sh := ccKind(t, l), shape(t, l)
			sc.learn(k, sh)
			if k == "system/compact_boundary" || k == "user/compact-summary" {
				ref[k] = sh
			}
		}
	}
	require.Len(t, ref, 2, "the corpus holds Claude Code's own compaction records")
	for _, name := range []string{"claude-code-go-cli.jsonl", "claude-code-swift-app.jsonl"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(corpusPath(t, name))
			require.NoError(t, err)
			s, err := Read(bytes.NewReader(data), "")
			require.NoError(t, err)
			k := cutAt(t, s.Messages, len(s.Messages)/2)
			block, err := AppendCompaction(data, writeBackFor(s.Messages, k, "the summary"))
			require.NoError(t, err)
			appended := splitLines(bytes.TrimPrefix(block, []byte("\n")))
			require.Greater(t, len(appended), 2)
			for i, kindOf := range []string{"system/compact_boundary", "user/compact-summary"} {
				got := shape(t, appended[i])
				if i == 0 {
					dropAppended(t, got)
				}
				assert.Equal(t, keys(ref[kindOf]), keys(got), "%s keys", kindOf)
				assert.Equal(t, ref[kindOf], got, "%s value types", kindOf)
			}
			var b, sum, first struct {
				UUID       string  `json:"uuid"`
				ParentUUID *string `json:"parentUuid"`
				SessionID  string  `json:"sessionId"`
				Timestamp  string  `json:"timestamp"`
				Logical    string  `json:"logicalParentUuid"`
				Meta       struct {
					Trigger   string `json:"trigger"`
					PreTokens int    `json:"preTokens"`
				} `json:"compactMetadata"`
			}
			require.NoError(t, json.Unmarshal(appended[0], &b))
			require.NoError(t, json.Unmarshal(appended[1], &sum))
			require.NoError(t, json.Unmarshal(appended[2], &first))
			assert.Nil(t, b.ParentUUID, "the boundary starts a new chain")
			assert.NotEmpty(t, b.Logical)
			assert.Contains(t, string(data), `"uuid":"`+b.Logical+`"`, "the logical parent is a line of the session")
			assert.Contains(t, string(data), `"sessionId":"`+b.SessionID+`"`)
			assert.Equal(t, "manual", b.Meta.Trigger)
			assert.Equal(t, 123456, b.Meta.PreTokens)
			require.NotNil(t, sum.ParentUUID)
			assert.Equal(t, b.UUID, *sum.ParentUUID)
			require.NotNil(t, first.ParentUUID)
			assert.Equal(t, sum.UUID, *first.ParentUUID)
			assert.Equal(t, "2030-01-02T03:04:05.006Z", b.Timestamp)
			// Each copy is the line it copies with its chain fields
			// changed, and nothing else added or lost.
			var prev string
			for _, l := range appended[2:] {
				var c struct {
					UUID       string `json:"uuid"`
					ParentUUID string `json:"parentUuid"`
					Timestamp  string `json:"timestamp"`
				}
				require.NoError(t, json.Unmarshal(l, &c))
				if prev != "" {
					assert.Equal(t, prev, c.ParentUUID)
				}
				assert.Greater(t, c.Timestamp, sum.Timestamp, "copies are newer than the summary")
				prev = c.UUID
			}
			for _, l := range splitLines(append(append([]byte(nil), data...), block...)) {
				if len(bytes.TrimSpace(l)) == 0 {
					continue
				}
				got := shape(t, l)
				if _, ok := got[appendedKey]; ok {
					dropAppended(t, got)
				}
				assert.Empty(t, sc.check(ccKind(t, l), got))
			}
		})
	}
}

// The compacted record appended to a Codex rollout has the fields and
// types of Codex's own, continues its windows, and its replacement items
// fit the shapes of the rollout's response items.
func TestAppendCompactionCodexShape(t *testing.T) {
	data, err := os.ReadFile(corpusPath(t, "codex-typescript.jsonl"))
	require.NoError(t, err)
	var ref map[string]string
	var lastWindow string
	items := schema{}
	payloads := map[string]bool{}
	for _, l := range splitLines(data) {
		var rec struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		require.NoError(t, json.Unmarshal(l, &rec))
		switch rec.Type {
		case "compacted":
			ref = shape(t, rec.Payload)
			var w struct {
				WindowID string `json:"window_id"`
			}
			require.NoError(t, json.Unmarshal(rec.Payload, &w))
			lastWindow = w.WindowID
		case "response_item":
			payloads[string(rec.Payload)] = true
			var it struct {
				Type string `json:"type"`
			}
			require.NoError(t, json.Unmarshal(rec.Payload, &it))
			items.learn(it.Type, shape(t, rec.Payload))
		}
	}
	require.NotNil(t, ref)
	s, err := Read(bytes.NewReader(data), "")
	require.NoError(t, err)
	k := cutAt(t, s.Messages, len(s.Messages)/2)
	block, err := AppendCompaction(data, writeBackFor(s.Messages, k, "the summary"))
	require.NoError(t, err)
	lines := splitLines(block)
	require.Len(t, lines, 2)
	var rec struct {
		Timestamp string          `json:"timestamp"`
		Type      string          `json:"type"`
		Payload   json.RawMessage `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(lines[0], &rec))
	assert.Equal(t, "compacted", rec.Type)
	assert.Equal(t, "2030-01-02T03:04:05.006Z", rec.Timestamp)
	got := shape(t, rec.Payload)
	dropAppended(t, got)
	assert.Equal(t, keys(ref), keys(got))
	assert.Equal(t, ref, got)
	var p struct {
		Message  string            `json:"message"`
		History  []json.RawMessage `json:"replacement_history"`
		Number   int               `json:"window_number"`
		First    string            `json:"first_window_id"`
		Previous string            `json:"previous_window_id"`
	}
	require.NoError(t, json.Unmarshal(rec.Payload, &p))
	assert.Equal(t, "the summary", p.Message)
	assert.Equal(t, 3, p.Number, "the corpus rollout is in its window 2")
	assert.Equal(t, lastWindow, p.Previous)
	assert.Equal(t, "019f36b8-881d-7403-bea8-cb0415953e68", p.First)
	for _, it := range p.History {
		var typ struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal(it, &typ))
		assert.Empty(t, items.check(typ.Type, shape(t, it)))
		if !strings.Contains(string(it), `"the summary"`) {
			assert.True(t, payloads[string(it)], "items other than the summary are the rollout's own, byte for byte")
		}
	}
	var ev struct {
		Type    string `json:"type"`
		Payload struct {
			Type string `json:"type"`
		} `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(lines[1], &ev))
	assert.Equal(t, "event_msg", ev.Type)
	assert.Equal(t, "context_compacted", ev.Payload.Type)
}

// A rollout without an earlier compaction starts the window count and
// names its first window the same way every time.
func TestAppendCompactionCodexFirstWindow(t *testing.T) {
	data, err := os.ReadFile(corpusPath(t, "codex-typescript.jsonl"))
	require.NoError(t, err)
	var head []byte
	for _, l := range splitLines(data) {
		if bytes.Contains(l, []byte(`"type":"compacted"`)) {
			break
		}
		head = append(append(head, l...), '\n')
	}
	s, err := Read(bytes.NewReader(head), "")
	require.NoError(t, err)
	k := cutAt(t, s.Messages, len(s.Messages)/2)
	var firsts []string
	for range 2 {
		block, err := AppendCompaction(head, writeBackFor(s.Messages, k, "sum"))
		require.NoError(t, err)
		var rec struct {
			Payload struct {
				Number   int    `json:"window_number"`
				First    string `json:"first_window_id"`
				Previous string `json:"previous_window_id"`
				Window   string `json:"window_id"`
			} `json:"payload"`
		}
		require.NoError(t, json.Unmarshal(splitLines(block)[0], &rec))
		assert.Equal(t, 1, rec.Payload.Number)
		assert.Equal(t, rec.Payload.First, rec.Payload.Previous)
		assert.NotEqual(t, rec.Payload.First, rec.Payload.Window)
		assert.Equal(t, "7", rec.Payload.First[14:15], "a version 7 uuid")
		firsts = append(firsts, rec.Payload.First)
	}
	assert.Equal(t, firsts[0], firsts[1])
}

func TestAppendCompactionRefuses(t *testing.T) {
	data, err := os.ReadFile(corpusPath(t, "claude-code-go-cli.jsonl"))
	require.NoError(t, err)
	s, err := Read(bytes.NewReader(data), "")
	require.NoError(t, err)
	wb := writeBackFor(s.Messages, cutAt(t, s.Messages, len(s.Messages)/2), "sum")

	// A last line being written is refused; a complete one without its
	// newline gets one.
	_, err = AppendCompaction(append(append([]byte(nil), data...), []byte("\n{\"type\":\"user\",\"mess")...), wb)
	assert.ErrorIs(t, err, ErrTornLine)
	assert.ErrorIs(t, err, ErrNotWritable)
	trimmed := bytes.TrimRight(data, "\n")
	block, err := AppendCompaction(trimmed, wb)
	require.NoError(t, err)
	assert.Equal(t, byte('\n'), block[0])

	// A message the file does not hold, and formats that take no
	// compaction back.
	bad := wb
	bad.FirstKeptID = "no-such-message"
	_, err = AppendCompaction(data, bad)
	assert.ErrorIs(t, err, ErrNotWritable)
	_, err = AppendCompaction([]byte(`{"messages":[{"role":"user","content":"hi"}]}`+"\n"), wb)
	assert.ErrorIs(t, err, ErrNotWritable)
}

// A Codex compaction that records its summary text (Codex's local
// compaction) keeps the summary where its replacement history has it.
func TestCompactedCodexSummaryInPlace(t *testing.T) {
	rollout := `{"timestamp":"2026-03-01T10:00:00.000Z","type":"session_meta","payload":{"id":"s1","timestamp":"2026-03-01T10:00:00.000Z","base_instructions":{"text":"You are Codex."}}}
{"timestamp":"2026-03-01T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the bug"}]}}
{"timestamp":"2026-03-01T10:00:02.000Z","type":"response_item","payload":{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"done"}]}}
{"timestamp":"2026-03-01T10:00:03.000Z","type":"compacted","payload":{"message":"SUMMARY","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the bug"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"SUMMARY"}]}]}}
{"timestamp":"2026-03-01T10:00:04.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"next"}]}}
`
	s, err := Read(strings.NewReader(rollout), "")
	require.NoError(t, err)
	require.Len(t, s.AgentCompactions, 1)
	assert.Equal(t, "SUMMARY", s.AgentCompactions[0].Summary)
	var got []string
	for _, m := range s.Live() {
		got = append(got, fmt.Sprintf("%s %v %s", m.Role, m.Summary, textOf(m.Content, abi.BlockText)))
	}
	assert.Equal(t, []string{"system false You are Codex.", "user false fix the bug", "user true SUMMARY", "user false next"}, got)
}
