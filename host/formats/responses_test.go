package formats

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResponsesRequestItems(t *testing.T) {
	data := fixture(t, "responses.json")
	s, err := Read(bytes.NewReader(data), Responses)
	require.NoError(t, err)
	require.NoError(t, Validate(s.Messages))
	assert.Empty(t, s.Repaired)
	type want struct {
		id, role string
		types    []string
	}
	wants := []want{
		{ResponsesInstructionsID, abi.RoleSystem, []string{"text"}},
		{"responses-0", abi.RoleSystem, []string{"text"}},
		{"responses-1", abi.RoleUser, []string{"text", "image"}},
		// The encrypted reasoning item opens the turn of the call it precedes.
		{"responses-2", abi.RoleAssistant, []string{"thinking", "tool_use"}},
		{"responses-4", abi.RoleUser, []string{"tool_result"}},
		// The hosted web search stays inside its model turn.
		{"responses-5", abi.RoleAssistant, []string{"thinking", "tool_use"}},
		{"responses-8", abi.RoleUser, []string{"tool_result"}},
		{"responses-9", abi.RoleAssistant, []string{"text"}},
		{"responses-10", abi.RoleUser, []string{"text"}},
		{"responses-11", abi.RoleUser, []string{"text"}},
		// The item reference joins the message after it.
		{"responses-12", abi.RoleUser, []string{"text"}},
	}
	require.Len(t, s.Messages, len(wants), "%v", describeAll(s.Messages))
	for i, w := range wants {
		m := s.Messages[i]
		assert.Equal(t, w.id, m.ID, "message %d", i)
		assert.Equal(t, w.role, m.Role, "message %d", i)
		var types []string
		for _, b := range m.Content {
			types = append(types, b.Type)
		}
		assert.Equal(t, w.types, types, "message %d", i)
	}
	assert.True(t, s.Messages[0].Pinned && s.Messages[1].Pinned, "instructions and the leading developer message are pinned")
	assert.Equal(t, "call_2", s.Messages[6].Content[0].ToolUseID)
	assert.JSONEq(t, `{"input":"*** Begin Patch\n*** End Patch"}`, string(s.Messages[5].Content[1].Input))
	assert.True(t, s.Messages[9].Summary && s.Messages[9].Pinned, "the compaction item is the provider's summary, kept whole")
	assert.Equal(t, "thanks; now run the linter", s.Messages[8].Content[0].Text)

	// As read, the request writes back byte for byte.
	var buf bytes.Buffer
	require.NoError(t, s.Request.Write(&buf, s.Messages))
	assert.Equal(t, string(data), buf.String())

	// A summary in place of the first turns: the kept items keep their
	// bytes, reasoning's encrypted content and the unknown items included.
	summary := abi.Message{ID: "sum", Role: abi.RoleUser, Summary: true, Content: []abi.Block{text("we fixed the parser")}}
	msgs := append([]abi.Message{s.Messages[0], s.Messages[1], summary}, s.Messages[5:]...)
	buf.Reset()
	require.NoError(t, s.Request.Write(&buf, msgs))
	out := buf.Bytes()
	tail := data[bytes.Index(data, []byte(`{"type":"reasoning","id":"rs_2"`)):]
	assert.True(t, bytes.HasSuffix(out, tail), "the kept items and everything after them are as sent:\n%s", out)
	assert.Contains(t, string(out), `{"type":"message","role":"user","content":[{"type":"input_text","text":"we fixed the parser"}]},`)
	assert.Contains(t, string(out), `"instructions":"You are a coding agent."`)
	back, err := Read(bytes.NewReader(out), Responses)
	require.NoError(t, err)
	require.NoError(t, Validate(back.Messages))
	assert.Len(t, back.Messages, len(msgs))

	// Without the instructions message, the field goes.
	buf.Reset()
	require.NoError(t, s.Request.Write(&buf, s.Messages[1:]))
	assert.NotContains(t, buf.String(), `"instructions"`)
	assert.True(t, json.Valid(buf.Bytes()))
}

func TestResponsesRequestRefusals(t *testing.T) {
	for name, body := range map[string]string{
		"string input":    `{"model":"m","input":"hello"}`,
		"no input":        `{"model":"m","tools":[]}`,
		"item not object": `{"input":[1]}`,
		"bad role":        `{"input":[{"type":"message","role":"tool","content":"x"}]}`,
		"bad instruction": `{"instructions":{"a":1},"input":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Read(bytes.NewReader([]byte(body)), Responses)
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
		})
	}
}

// TestResponsesCodexHistory reads the items Codex recorded in a real
// session as the request Codex sends: every call meets its output, no
// item is repaired, and the request writes back as it came.
func TestResponsesCodexHistory(t *testing.T) {
	path, ok := findCorpus("codex-typescript.jsonl")
	if !ok {
		t.Skip("corpus not present")
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var items []json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l codexLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		if l.Type == "response_item" {
			items = append(items, l.Payload)
		}
	}
	require.NoError(t, sc.Err())
	require.Greater(t, len(items), 500)
	input, err := json.Marshal(items)
	require.NoError(t, err)
	body := []byte(`{"model":"gpt-5-codex","instructions":"You are Codex.","input":` + string(input) + `,"tools":[],"stream":true}`)
	s, err := Read(bytes.NewReader(body), Responses)
	require.NoError(t, err)
	assert.Empty(t, s.Repaired)
	require.NoError(t, Validate(s.Messages))
	calls := 0
	for _, m := range s.Messages {
		for _, b := range m.Content {
			if b.Type == abi.BlockToolUse {
				calls++
			}
		}
	}
	assert.Equal(t, 311, calls, "function and custom tool calls")
	var buf bytes.Buffer
	require.NoError(t, s.Request.Write(&buf, s.Messages))
	assert.True(t, bytes.Equal(body, buf.Bytes()))
	// Message IDs name the item each message starts at, in order.
	last := -1
	for _, m := range s.Messages[1:] {
		n, err := strconv.Atoi(m.ID[len(Responses)+1:])
		require.NoError(t, err, m.ID)
		assert.Greater(t, n, last)
		last = n
	}
}

// projectResponses is msgs as a Responses request can hold them: tool
// results travel as output items (consecutive ones read back as one
// message, is_error lost), and the items of consecutive assistant
// messages read back as one model turn.
func projectResponses(msgs []abi.Message) []abi.Message {
	var out []abi.Message
	resultsOpen := false
	for i, m := range msgs {
		p := plain(m)
		p.Pinned = m.Role == abi.RoleSystem && (i == 0 || out[len(out)-1].Pinned)
		switch m.Role {
		case abi.RoleUser:
			var results, rest []abi.Block
			for _, b := range p.Content {
				if b.Type == abi.BlockToolResult {
					b.IsError = false
					results = append(results, b)
				} else {
					rest = append(rest, b)
				}
			}
			if len(results) > 0 {
				if resultsOpen {
					out[len(out)-1].Content = append(out[len(out)-1].Content, results...)
				} else {
					out = append(out, abi.Message{Role: abi.RoleUser, Content: results})
				}
				resultsOpen = true
			}
			if len(rest) > 0 {
				out = append(out, abi.Message{Role: abi.RoleUser, Content: rest})
				resultsOpen = false
			}
			continue
		case abi.RoleAssistant:
			if n := len(out); n > 0 && out[n-1].Role == abi.RoleAssistant {
				out[n-1].Content = append(out[n-1].Content, p.Content...)
				continue
			}
		}
		resultsOpen = false
		out = append(out, p)
	}
	return out
}
