package formats

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// claudeCodeDefaultModelRequest has the shape of what Claude Code sends
// with no --model: a top-level system and system messages inside
// "messages", one of them empty with a field of its own, one last.
const claudeCodeDefaultModelRequest = `{"model":"claude-opus-5-5","messages":[` +
	`{"role":"user","content":"hello"},` +
	`{"role":"system","content":[],"output_config":{"effort":"medium"}},` +
	`{"role":"assistant","content":[{"type":"text","text":"Hi. What next?"}]},` +
	`{"role":"user","content":[{"type":"text","text":"<system-reminder>\nbe brief\n</system-reminder>"},{"type":"text","text":"list the files"}]},` +
	`{"role":"assistant","content":[{"type":"thinking","thinking":"ls","signature":"c2ln/1=="},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.go\nb.go"}]},` +
	`{"role":"assistant","content":[{"type":"text","text":"a.go and b.go"}]},` +
	`{"role":"user","content":"go on"},` +
	`{"role":"system","content":[{"type":"text","text":"# Environment\nPrimary working directory: /work"}]}],` +
	`"system":[{"type":"text","text":"You are Claude Code."}],"max_tokens":128000,"stream":true}`

// System messages inside "messages" are read as pinned system messages
// where they stand, and written back there; the request is not taken for
// an OpenAI Chat Completions one.
func TestAnthropicSystemMessagesInMessages(t *testing.T) {
	data := []byte(claudeCodeDefaultModelRequest)
	f, err := Detect(data)
	require.NoError(t, err)
	assert.Equal(t, Anthropic, f)

	s, err := Read(bytes.NewReader(data), Anthropic)
	require.NoError(t, err, "read as the Messages request it is")
	assert.Empty(t, s.Repaired)
	require.NoError(t, Validate(s.Messages))
	var roles []string
	for _, m := range s.Messages {
		roles = append(roles, m.Role)
		if m.Role == abi.RoleSystem {
			assert.True(t, m.Pinned, "%s is pinned", m.ID)
		}
	}
	assert.Equal(t, []string{"system", "user", "system", "assistant", "user", "assistant", "user", "assistant", "user", "system"}, roles)
	assert.Equal(t, "anthropic-8", s.Messages[len(s.Messages)-1].ID)

	var out bytes.Buffer
	require.NoError(t, s.Request.Write(&out, s.Messages))
	assert.Equal(t, string(data), out.String(), "as read, the request writes back byte for byte")

	// The first turns folded into a summary: the system prompt stays the
	// top-level system, the pinned system messages stay inside
	// "messages", as they were sent.
	summary := abi.Message{ID: "sum", Role: abi.RoleUser, Summary: true, Content: []abi.Block{{Type: abi.BlockText, Text: "Summary: the user said hello."}}}
	msgs := []abi.Message{s.Messages[0], s.Messages[2], summary}
	msgs = append(msgs, s.Messages[4:]...)
	out.Reset()
	require.NoError(t, s.Request.Write(&out, msgs))
	var doc struct {
		System   json.RawMessage   `json:"system"`
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	assert.Equal(t, `[{"type":"text","text":"You are Claude Code."}]`, string(doc.System))
	require.Len(t, doc.Messages, 8)
	assert.Equal(t, `{"role":"system","content":[],"output_config":{"effort":"medium"}}`, string(doc.Messages[0]))
	assert.Contains(t, string(doc.Messages[1]), "Summary: the user said hello.")
	assert.True(t, strings.HasSuffix(out.String(), `{"role":"user","content":"go on"},`+
		`{"role":"system","content":[{"type":"text","text":"# Environment\nPrimary working directory: /work"}]}],`+
		`"system":[{"type":"text","text":"You are Claude Code."}],"max_tokens":128000,"stream":true}`), "%s", out.String())

	// A changed system message keeps its role.
	changed := append([]abi.Message(nil), s.Messages...)
	changed[len(changed)-1].Content = []abi.Block{{Type: abi.BlockText, Text: "# Environment\nelsewhere"}}
	out.Reset()
	require.NoError(t, s.Request.Write(&out, changed))
	assert.Contains(t, out.String(), `{"role":"system","content":[{"type":"text","text":"# Environment\nelsewhere"}]}]`)
	back, err := Read(&out, Anthropic)
	require.NoError(t, err)
	assert.Len(t, back.Messages, len(s.Messages))
}
