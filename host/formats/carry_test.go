package formats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// agentLines are n lines as the agent of format appends them, numbered
// from first: Claude Code assistant lines chained after the file's last
// line, Codex user messages.
func agentWrites(t *testing.T, format string, data []byte, first, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	parent := ""
	if format == ClaudeCode {
		lines := splitLines(data)
		var last struct {
			UUID      string `json:"uuid"`
			SessionID string `json:"sessionId"`
		}
		require.NoError(t, json.Unmarshal(lines[len(lines)-1], &last))
		parent = last.UUID
	}
	for i := first; i < first+n; i++ {
		switch format {
		case ClaudeCode:
			uuid := fmt.Sprintf("0a9e0000-0000-4000-8000-%012d", i)
			fmt.Fprintf(&b, `{"parentUuid":%q,"isSidechain":false,"type":"assistant","message":{"id":"msg_agent_%d","role":"assistant","content":[{"type":"text","text":"agent line %d"}]},"uuid":%q,"timestamp":"2031-01-01T00:00:%02d.000Z"}`+"\n", parent, i, i, uuid, i%60)
			parent = uuid
		case Codex:
			fmt.Fprintf(&b, `{"timestamp":"2031-01-01T00:00:%02d.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"agent line %d"}]}}`+"\n", i%60, i)
		}
	}
	return b.Bytes()
}

// agentSaid is the numbers of the agent's lines the conversation the
// agent continues with holds, in order.
func agentSaid(t *testing.T, file []byte) []int {
	t.Helper()
	s, err := Read(bytes.NewReader(file), "")
	require.NoError(t, err)
	var out []int
	for _, m := range s.Live() {
		for _, b := range m.Content {
			var n int
			if _, err := fmt.Sscanf(b.Text, "agent line %d", &n); err == nil && strings.HasPrefix(b.Text, "agent line ") {
				out = append(out, n)
			}
		}
	}
	return out
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// Lines the agent wrote between the read and the block are hidden by the
// compaction; the carry brings them after it, in order and before lines
// it wrote after the block, and the history still holds each once.
func TestCarryBringsHiddenLinesAfterTheCompaction(t *testing.T) {
	for name, format := range map[string]string{"claude-code-swift-app.jsonl": ClaudeCode, "codex-typescript.jsonl": Codex} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(corpusPath(t, name))
			require.NoError(t, err)
			orig, err := Read(bytes.NewReader(data), "")
			require.NoError(t, err)
			k := cutAt(t, orig.Messages, len(orig.Messages)/2)
			block, err := AppendCompaction(data, writeBackFor(orig.Messages, k, "the summary"))
			require.NoError(t, err)
			hidden := agentWrites(t, format, data, 1, 3)
			after := agentWrites(t, format, cat(data, hidden), 4, 2)

			assert.Equal(t, seq(4, 5), agentSaid(t, cat(data, hidden, block, after)), "without a carry the lines before the block are hidden")

			c, err := NewCarrier(format)
			require.NoError(t, err)
			carry, err := c.Carry([]Landed{{Data: hidden, Unseen: true}, {Data: block, Ours: true}, {Data: after}})
			require.NoError(t, err)
			require.NotEmpty(t, carry)
			file := cat(data, hidden, block, after, carry)
			assert.Equal(t, seq(1, 5), agentSaid(t, file))
			got, err := Read(bytes.NewReader(file), "")
			require.NoError(t, err)
			withAgent, err := Read(bytes.NewReader(cat(data, hidden, after)), "")
			require.NoError(t, err)
			assert.Equal(t, view(withAgent.Messages), view(got.Messages), "the history holds each line once")
			want := view(expected(orig.Messages, k, "the summary"))
			assert.Equal(t, want, view(got.Live())[:len(want)], "the compaction is the one written")
			assert.NoError(t, Validate(got.Live()))

			// Once carried, nothing more is.
			again, err := c.Carry([]Landed{{Data: hidden, Unseen: true}, {Data: block, Ours: true}, {Data: after}, {Data: carry, Ours: true}})
			require.NoError(t, err)
			assert.Nil(t, again)
		})
	}
}

// Claude Code resumes by following parentUuid from the newest line: the
// copies chain after the block's last line, with uuids derived from the
// summary's (so no uuid names two lines), the newest timestamps, and
// their own message ids.
func TestCarryClaudeCodeChain(t *testing.T) {
	data, err := os.ReadFile(corpusPath(t, "claude-code-swift-app.jsonl"))
	require.NoError(t, err)
	orig, err := Read(bytes.NewReader(data), "")
	require.NoError(t, err)
	k := cutAt(t, orig.Messages, len(orig.Messages)/2)
	block, err := AppendCompaction(data, writeBackFor(orig.Messages, k, "the summary"))
	require.NoError(t, err)
	hidden := agentWrites(t, ClaudeCode, data, 1, 2)
	c, err := NewCarrier(ClaudeCode)
	require.NoError(t, err)
	carry, err := c.Carry([]Landed{{Data: hidden, Unseen: true}, {Data: block, Ours: true}})
	require.NoError(t, err)

	type line struct {
		UUID       string `json:"uuid"`
		ParentUUID string `json:"parentUuid"`
		Timestamp  string `json:"timestamp"`
		Summary    bool   `json:"isCompactSummary"`
		Message    struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	parse := func(b []byte) []line {
		var out []line
		for _, l := range splitLines(b) {
			var x line
			require.NoError(t, json.Unmarshal(l, &x))
			out = append(out, x)
		}
		return out
	}
	bl, hl, cl := parse(block), parse(hidden), parse(carry)
	require.Len(t, cl, len(hl))
	summary := ""
	for _, l := range bl {
		if l.Summary {
			summary = l.UUID
		}
	}
	parent := bl[len(bl)-1].UUID
	for i, c := range cl {
		assert.Equal(t, copyUUID(summary, hl[i].UUID), c.UUID)
		assert.Equal(t, parent, c.ParentUUID, "chained after the line before")
		assert.Equal(t, hl[i].Message.ID+"-"+summary[:8], c.Message.ID)
		assert.Greater(t, c.Timestamp, hl[len(hl)-1].Timestamp, "newer than every line")
		assert.Greater(t, c.Timestamp, bl[len(bl)-1].Timestamp)
		parent = c.UUID
	}
}

// Codex replaces its history at each compacted record, so lines that
// landed unseen before a carried record need another, which holds them
// too; one that follows everything it was made from needs nothing.
func TestCarryCodexAgain(t *testing.T) {
	data, err := os.ReadFile(corpusPath(t, "codex-typescript.jsonl"))
	require.NoError(t, err)
	orig, err := Read(bytes.NewReader(data), "")
	require.NoError(t, err)
	k := cutAt(t, orig.Messages, len(orig.Messages)/2)
	block, err := AppendCompaction(data, writeBackFor(orig.Messages, k, "the summary"))
	require.NoError(t, err)
	g1 := agentWrites(t, Codex, data, 1, 1)
	tail := []Landed{{Data: g1, Unseen: true}, {Data: block, Ours: true}}
	c, err := NewCarrier(Codex)
	require.NoError(t, err)
	c1, err := c.Carry(tail)
	require.NoError(t, err)
	g2 := agentWrites(t, Codex, data, 2, 2)
	tail = append(tail, Landed{Data: g2, Unseen: true}, Landed{Data: c1, Ours: true})
	assert.Equal(t, []int{1}, agentSaid(t, cat(data, g1, block, g2, c1)), "lines 2 and 3 landed before the carry")
	c2, err := c.Carry(tail)
	require.NoError(t, err)
	assert.Equal(t, seq(1, 3), agentSaid(t, cat(data, g1, block, g2, c1, c2)))

	var w1, w2 codexCompactedLine
	require.NoError(t, json.Unmarshal(splitLines(c1)[0], &w1))
	require.NoError(t, json.Unmarshal(splitLines(c2)[0], &w2))
	assert.Equal(t, w1.Payload.WindowNumber+1, w2.Payload.WindowNumber)
	assert.Equal(t, w1.Payload.WindowID, w2.Payload.PreviousWindowID)
	assert.Equal(t, "the summary", w2.Payload.Message)

	events := []byte(`{"timestamp":"2031-01-01T00:00:09.000Z","type":"event_msg","payload":{"type":"token_count","info":null}}` + "\n")
	none, err := c.Carry(append(slices.Clone(tail), Landed{Data: events, Unseen: true}, Landed{Data: c2, Ours: true}))
	require.NoError(t, err)
	assert.Nil(t, none, "events are not in the history: nothing is hidden")

	none, err = c.Carry(append(tail, Landed{Data: agentWrites(t, Codex, data, 4, 1)}, Landed{Data: c2, Ours: true}))
	require.NoError(t, err)
	assert.Nil(t, none, "the line before the latest record was read when it was made")
}

// Nothing is carried when nothing is hidden; what cannot be carried is
// refused with ErrCannotCarry.
func TestCarryDecisions(t *testing.T) {
	for name, format := range map[string]string{"claude-code-swift-app.jsonl": ClaudeCode, "codex-typescript.jsonl": Codex} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(corpusPath(t, name))
			require.NoError(t, err)
			orig, err := Read(bytes.NewReader(data), "")
			require.NoError(t, err)
			block, err := AppendCompaction(data, writeBackFor(orig.Messages, cutAt(t, orig.Messages, len(orig.Messages)/2), "s"))
			require.NoError(t, err)
			agent := agentWrites(t, format, data, 1, 1)
			for _, tail := range [][]Landed{
				{{Data: block, Ours: true}},
				{{Data: block, Ours: true}, {Data: agent}},
			} {
				c, err := NewCarrier(format)
				require.NoError(t, err)
				got, err := c.Carry(tail)
				require.NoError(t, err)
				assert.Nil(t, got)
			}
			ownCompaction := map[string]string{
				ClaudeCode: `{"parentUuid":null,"type":"system","subtype":"compact_boundary","uuid":"b","content":"Conversation compacted"}` + "\n",
				Codex:      `{"timestamp":"2031-01-01T00:00:00.000Z","type":"compacted","payload":{"message":"theirs","replacement_history":[]}}` + "\n",
			}[format]
			for what, hidden := range map[string]string{
				"the agent's own compaction": ownCompaction,
				"half a line":                `{"type":"assistant","mess`,
				"not JSON":                   "garbage\n",
			} {
				c, err := NewCarrier(format)
				require.NoError(t, err)
				_, err = c.Carry([]Landed{{Data: []byte(hidden), Unseen: true}, {Data: block, Ours: true}})
				assert.ErrorIs(t, err, ErrCannotCarry, what)
			}
		})
	}
}
