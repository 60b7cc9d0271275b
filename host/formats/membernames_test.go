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

// topKeys lists the keys of a JSON object's top level, in order,
// duplicates included.
func topKeys(t *testing.T, doc []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok, "%s", doc)
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, k.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

// A request whose members are spelt in other capitals ("Messages",
// "System", "Input") is read as encoding/json reads it, ignoring case; a
// compacted write gives those members their new values under the names
// the request spells them with, and adds no second member.
func TestWriteKeepsMemberNamesAsRead(t *testing.T) {
	turns := func(item func(role, text string) string) string {
		return item("user", "first task") + "," + item("assistant", "done with it") + "," +
			item("user", "second task") + "," + item("assistant", "on it") + "," + item("user", "go on")
	}
	chat := func(role, text string) string { return `{"role":"` + role + `","content":"` + text + `"}` }
	for _, tc := range []struct {
		format, body string
		// keys are the top-level keys the compacted write must have, in order.
		keys []string
		// system is the new system text written, "" to drop the system.
		system string
	}{
		{Anthropic, `{"model":"m","System":"be brief","Messages":[` + turns(chat) + `],"max_tokens":9}`,
			[]string{"model", "System", "Messages", "max_tokens"}, "be briefer"},
		{Anthropic, `{"model":"m","SYSTEM":[{"type":"text","text":"be brief"}],"messages":[` + turns(chat) + `]}`,
			[]string{"model", "messages"}, ""},
		{OpenAI, `{"model":"m","MESSAGES":[` + turns(chat) + `]}`,
			[]string{"model", "MESSAGES"}, "-"},
		{Responses, `{"model":"m","Instructions":"be brief","Input":[` + turns(func(role, text string) string {
			return `{"type":"message","role":"` + role + `","content":"` + text + `"}`
		}) + `]}`, []string{"model", "Instructions", "Input"}, "be briefer"},
		{GeminiAPI, `{"SystemInstruction":{"parts":[{"text":"be brief"}]},"Contents":[` + turns(func(role, text string) string {
			if role == "assistant" {
				role = "model"
			}
			return `{"role":"` + role + `","parts":[{"text":"` + text + `"}]}`
		}) + `]}`, []string{"Contents"}, ""},
	} {
		t.Run(tc.format+" "+tc.keys[len(tc.keys)-1], func(t *testing.T) {
			s, err := Read(strings.NewReader(tc.body), tc.format)
			require.NoError(t, err)
			var head, rest []abi.Message
			for _, m := range s.Messages {
				if m.Role == abi.RoleSystem {
					head = append(head, m)
				} else {
					rest = append(rest, m)
				}
			}
			require.Len(t, rest, 5)
			switch tc.system {
			case "":
				head = nil
			case "-":
			default:
				require.Len(t, head, 1)
				head[0].Content = []abi.Block{{Type: abi.BlockText, Text: tc.system}}
			}
			summary := abi.Message{ID: "sum", Role: abi.RoleUser, Summary: true, Content: []abi.Block{{Type: abi.BlockText, Text: "Summary: the first task is done."}}}
			msgs := append(append(head, summary), rest[2:]...)
			var out bytes.Buffer
			require.NoError(t, s.Request.Write(&out, msgs))
			assert.Equal(t, tc.keys, topKeys(t, out.Bytes()), "%s", out.String())
			assert.Contains(t, out.String(), "Summary: the first task is done.")
			assert.NotContains(t, out.String(), "first task\"")
			if tc.system != "" && tc.system != "-" {
				assert.Contains(t, out.String(), tc.system)
			}
			back, err := Read(&out, tc.format)
			require.NoError(t, err)
			assert.Len(t, back.Messages, len(msgs))
		})
	}
}
