package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// geminiRequest is a generateContent request with every kind of part, an
// unknown part and unknown fields, laid out with the whitespace a client
// may use.
const geminiRequest = `{
  "systemInstruction": {"role": "user", "parts": [{"text": "You are a careful coding agent."}, {"text": "Be brief."}]},
  "contents": [
    {"role": "user", "parts": [{"text": "fix the parser"}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]},
    {"role": "model", "parts": [
      {"text": "Looking at the files.", "thought": true, "thoughtSignature": "c2lnbmF0dXJlLW9uZQ=="},
      {"functionCall": {"name": "read_file", "args": {"path": "a.go"}}, "thoughtSignature": "c2lnLXR3bw=="},
      {"functionCall": {"name": "read_file", "args": {"path": "b.go"}}},
      {"functionCall": {"id": "call-x", "name": "list_dir", "args": {}}}
    ]},
    {"role": "user", "parts": [
      {"text": "here you go"},
      {"functionResponse": {"id": "call-x", "name": "list_dir", "response": {"output": "a.go b.go"}}},
      {"functionResponse": {"name": "read_file", "response": {"output": "package a"}}},
      {"functionResponse": {"name": "read_file", "response": {"output": "package b"}}}
    ]},
    {"role": "model", "parts": [{"executableCode": {"language": "PYTHON", "code": "print(1)"}}, {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1"}}, {"x_future_part": {"k": 1}}]},
    {"role": "user", "parts": [{"fileData": {"mimeType": "text/plain", "fileUri": "https://example.com/f.txt"}}], "x_future": true},
    {"role": "model", "parts": [{"text": "done"}]}
  ],
  "tools": [{"functionDeclarations": [{"name": "read_file", "parameters": {"type": "object"}}]}],
  "generationConfig": {"maxOutputTokens": 2000, "thinkingConfig": {"includeThoughts": true}},
  "x_unknown": [1, 2]
}`

func TestGeminiAPIRequestParts(t *testing.T) {
	s, err := Read(strings.NewReader(geminiRequest), GeminiAPI)
	require.NoError(t, err)
	require.NoError(t, Validate(s.Messages))
	assert.Empty(t, s.Repaired)
	assert.Equal(t, 1, s.Skipped["gemini x_future_part"])
	type want struct {
		id, role string
		types    []string
	}
	wants := []want{
		{GeminiSystemID, abi.RoleSystem, []string{"text"}},
		{"gemini-api-0", abi.RoleUser, []string{"text", "image"}},
		{"gemini-api-1", abi.RoleAssistant, []string{"thinking", "tool_use", "tool_use", "tool_use"}},
		// The results come first, in the order the model made the calls.
		{"gemini-api-2", abi.RoleUser, []string{"tool_result", "tool_result", "tool_result", "text"}},
		{"gemini-api-3", abi.RoleAssistant, []string{"text", "text", "thinking"}},
		{"gemini-api-4", abi.RoleUser, []string{"text"}},
		{"gemini-api-5", abi.RoleAssistant, []string{"text"}},
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
	assert.True(t, s.Messages[0].Pinned)
	assert.Equal(t, "You are a careful coding agent.\nBe brief.", s.Messages[0].Content[0].Text)
	calls, results := s.Messages[2].Content, s.Messages[3].Content
	// The call with an id is answered by id; the two without by name, in order.
	assert.Equal(t, "call-x", results[0].ToolUseID)
	assert.Equal(t, calls[1].ID, results[1].ToolUseID)
	assert.Equal(t, calls[2].ID, results[2].ToolUseID)
	assert.JSONEq(t, `{"output":"package b"}`, results[2].Text)
	assert.JSONEq(t, `{"path":"b.go"}`, string(calls[2].Input))
	assert.Equal(t, "image/png", s.Messages[1].Content[1].MediaType)

	// As read, the request writes back byte for byte.
	var buf bytes.Buffer
	require.NoError(t, s.Request.Write(&buf, s.Messages))
	assert.Equal(t, geminiRequest, buf.String())
}

// A compaction drops the folded contents and puts a summary first; every
// content kept keeps its bytes, thought signatures included.
func TestGeminiAPIRequestCompacted(t *testing.T) {
	s, err := Read(strings.NewReader(geminiRequest), GeminiAPI)
	require.NoError(t, err)
	summary := abi.Message{ID: "s", Role: abi.RoleUser, Summary: true, Content: []abi.Block{{Type: abi.BlockText, Text: "Summary: <earlier>"}}}
	msgs := append([]abi.Message{s.Messages[0], summary}, s.Messages[4:]...)
	var buf bytes.Buffer
	require.NoError(t, s.Request.Write(&buf, msgs))
	var doc struct {
		SystemInstruction json.RawMessage   `json:"systemInstruction"`
		Contents          []json.RawMessage `json:"contents"`
		XUnknown          json.RawMessage   `json:"x_unknown"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	require.Len(t, doc.Contents, 4)
	assert.JSONEq(t, `{"role":"user","parts":[{"text":"Summary: <earlier>"}]}`, string(doc.Contents[0]))
	assert.Contains(t, string(doc.Contents[0]), "<earlier>", "no HTML escaping")
	assert.Contains(t, buf.String(), `{"role": "model", "parts": [{"executableCode"`, "a kept content keeps its bytes")
	assert.Equal(t, `[1, 2]`, string(doc.XUnknown))
	back, err := Read(&buf, GeminiAPI)
	require.NoError(t, err)
	require.NoError(t, Validate(back.Messages))

	// A new call and its result, written from messages: the made-up call
	// ID stays out of the wire, the result names its function.
	var out bytes.Buffer
	require.NoError(t, Write(&out, GeminiAPI, s.Messages[:4]))
	assert.NotContains(t, out.String(), geminiCallPrefix)
	assert.Contains(t, out.String(), `"functionResponse":{"name":"read_file","response":{"output":"package a"}}`)
	assert.Contains(t, out.String(), `"functionCall":{"id":"call-x","name":"list_dir","args":{}}`)
	again, err := Read(&out, GeminiAPI)
	require.NoError(t, err)
	require.NoError(t, Validate(again.Messages))
	assert.Empty(t, again.Repaired)
}

func TestGeminiAPIRequestRefusals(t *testing.T) {
	for name, body := range map[string]string{
		"no contents":      `{"model":"x"}`,
		"contents object":  `{"contents":{"role":"user"}}`,
		"unknown role":     `{"contents":[{"role":"tool","parts":[{"text":"x"}]}]}`,
		"parts not a list": `{"contents":[{"role":"user","parts":"x"}]}`,
		"system number":    `{"systemInstruction":3,"contents":[{"role":"user","parts":[{"text":"x"}]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Read(strings.NewReader(body), GeminiAPI)
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
		})
	}
}

// FuzzReadGeminiAPI checks the reader against its writer: whatever reads
// writes back byte for byte when nothing was repaired, and a request
// written from its messages reads back to the same messages.
func FuzzReadGeminiAPI(f *testing.F) {
	f.Add([]byte(geminiRequest))
	f.Add([]byte(`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f"}}]},{"parts":[{"functionResponse":{"name":"g","response":"x"}}]}]}`))
	f.Add([]byte(`{"systemInstruction":"s","contents":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Read(bytes.NewReader(data), GeminiAPI)
		if err != nil {
			var pe *ParseError
			var me *MismatchError
			if !errors.As(err, &me) {
				require.ErrorAs(t, err, &pe)
			}
			return
		}
		require.NoError(t, Validate(s.Messages))
		var buf bytes.Buffer
		require.NoError(t, s.Request.Write(&buf, s.Messages))
		if len(s.Repaired) == 0 {
			require.Equal(t, string(data), buf.String())
		}
		var plain bytes.Buffer
		require.NoError(t, Write(&plain, GeminiAPI, s.Messages))
		back, err := Read(&plain, GeminiAPI)
		if len(s.Messages) == 0 {
			return
		}
		require.NoError(t, err, "%s", plain.Bytes())
		require.NoError(t, Validate(back.Messages))
		require.Equal(t, describeAll(projectGemini(s.Messages)), describeAll(stripIDs(back.Messages)))
	})
}

// projectGemini is msgs as a Gemini request holds them: a result is an
// object (text wrapped as {"output": text}) and has no is_error.
func projectGemini(msgs []abi.Message) []abi.Message {
	out := stripIDs(msgs)
	for i := range out {
		out[i].Content = cloneBlocks(out[i].Content)
		for j := range out[i].Content {
			if b := &out[i].Content[j]; b.Type == abi.BlockToolResult {
				b.IsError, b.Text = false, geminiResultText(geminiResponse(b.Text))
			}
		}
	}
	return out
}
