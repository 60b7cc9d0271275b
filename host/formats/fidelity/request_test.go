package fidelity_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
)

// prunable is an Anthropic request whose old tool result is long enough
// to prune; the result carries fields the canonical form does not hold.
func prunable() []byte {
	long := strings.Repeat("a.txt\n", 400)
	return []byte(`{
  "model": "claude-sonnet-4-5",
  "max_tokens": 1000,
  "messages": [
    {"role": "user", "content": "list /tmp"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "/tmp"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "cache_control": {"type": "ephemeral"}, "content": ` + fmt.Sprintf("%q", long) + `, "x_future": [1, 2]}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Many files.", "citations": null}]},
    {"role": "user", "content": "thanks", "x_note": "kept"}
  ],
  "x_unknown_top": {"a": 1}
}
`)
}

func TestRequestPruneKeepsBlockFields(t *testing.T) {
	body := prunable()
	s, err := formats.Read(bytes.NewReader(body), formats.Anthropic)
	require.NoError(t, err)
	e, err := host.New(host.Config{ContextWindow: 3000, MaxOutputTokens: 500, Tokenizer: "chars",
		PruneThreshold: 0.1, CompactThreshold: 0.99, EmergencyThreshold: 0.999,
		PruneMinTokens: 50, PruneKeepTokens: 20, ProtectRecentTokens: 10, KeepRecentTokens: 10})
	require.NoError(t, err)
	sess := e.NewSession()
	require.NoError(t, sess.Append(s.Messages...))
	d, err := e.EnsureFits(context.Background(), sess, host.Request{})
	require.NoError(t, err)
	require.Equal(t, host.ActionPruned, d.Action, "the gate should have pruned, not %v", d.Action)

	var out bytes.Buffer
	require.NoError(t, s.Request.Write(&out, sess.Context()))
	var in, got struct {
		Messages []json.RawMessage `json:"messages"`
		Top      json.RawMessage   `json:"x_unknown_top"`
	}
	require.NoError(t, json.Unmarshal(body, &in))
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.Len(t, got.Messages, len(in.Messages))
	assert.JSONEq(t, string(in.Top), string(got.Top))
	for i := range in.Messages {
		if i != 2 {
			assert.Equal(t, string(in.Messages[i]), string(got.Messages[i]), "message %d was not pruned and must keep its bytes", i)
		}
	}
	var result struct {
		Content []map[string]json.RawMessage `json:"content"`
	}
	require.NoError(t, json.Unmarshal(got.Messages[2], &result))
	require.Len(t, result.Content, 1)
	b := result.Content[0]
	assert.JSONEq(t, `{"type":"ephemeral"}`, string(b["cache_control"]))
	assert.JSONEq(t, `[1,2]`, string(b["x_future"]))
	assert.JSONEq(t, `"t1"`, string(b["tool_use_id"]))
	var text string
	require.NoError(t, json.Unmarshal(b["content"], &text))
	assert.Less(t, len(text), 2400, "the result was not shortened")
	assert.Contains(t, text, "a.txt")
}

func TestReplaceMessages(t *testing.T) {
	summary := []abi.Message{{Role: abi.RoleUser, Summary: true, Content: []abi.Block{{Type: abi.BlockText, Text: "Summary: listed /tmp."}}}}
	cases := []struct {
		format string
		body   string
		k      int
		// tail is the part of body after the first k messages, kept as is.
		tail string
	}{
		{formats.Anthropic, `{"model":"m", "messages": [ {"role":"user","content":"a"} ,{"role":"assistant","content":"b"},  {"role":"user","content":"c"} ], "stream":true}`, 2,
			`{"role":"user","content":"c"} ], "stream":true}`},
		{formats.OpenAI, "{\"messages\":[\n{\"role\":\"system\",\"content\":\"s\"},\n{\"role\":\"user\",\"content\":\"a\"},\n{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{ }\"}}]},\n{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"x\"}\n],\"model\":\"gpt\"}", 2,
			"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{ }\"}}]},\n{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"x\"}\n],\"model\":\"gpt\"}"},
	}
	for _, c := range cases {
		t.Run(c.format, func(t *testing.T) {
			out, err := formats.ReplaceMessages(c.format, []byte(c.body), c.k, summary)
			require.NoError(t, err)
			head := c.body[:strings.Index(c.body, "[")+1]
			assert.True(t, strings.HasPrefix(string(out), head), "bytes before the messages changed: %s", out)
			assert.True(t, strings.HasSuffix(string(out), c.tail), "bytes after the replaced messages changed: %s", out)
			s, err := formats.Read(bytes.NewReader(out), c.format)
			require.NoError(t, err)
			assert.Equal(t, "Summary: listed /tmp.", s.Messages[0].Content[0].Text, "the summary stands first")

			same, err := formats.ReplaceMessages(c.format, []byte(c.body), 0, nil)
			require.NoError(t, err)
			assert.Equal(t, c.body, string(same), "replacing nothing must change nothing")

			_, err = formats.ReplaceMessages(c.format, []byte(c.body), 9, summary)
			assert.Error(t, err)
		})
	}
	_, err := formats.ReplaceMessages(formats.ClaudeCode, []byte(`{"messages":[]}`), 0, summary)
	assert.ErrorIs(t, err, formats.ErrUnknownFormat)
}

func TestWriteParallelResultsInOneMessage(t *testing.T) {
	// Claude Code records each parallel result in its own user record.
	msgs := []abi.Message{
		{ID: "u", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "go"}}},
		{ID: "a", Role: abi.RoleAssistant, Content: []abi.Block{
			{Type: abi.BlockToolUse, ID: "t1", Name: "ls", Input: json.RawMessage(`{}`)},
			{Type: abi.BlockToolUse, ID: "t2", Name: "du", Input: json.RawMessage(`{}`)}}},
		{ID: "r1", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "t1", Text: "a"}}},
		{ID: "r2", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "t2", Text: "b"}, {Type: abi.BlockText, Text: "and?"}}},
	}
	require.NoError(t, formats.Validate(msgs))
	var buf bytes.Buffer
	require.NoError(t, formats.Write(&buf, formats.Anthropic, msgs))
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string `json:"type"`
				ToolUseID string `json:"tool_use_id"`
			} `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &req))
	require.Len(t, req.Messages, 3, "%s", buf.String())
	last := req.Messages[2]
	require.Len(t, last.Content, 3)
	assert.Equal(t, "t1", last.Content[0].ToolUseID)
	assert.Equal(t, "t2", last.Content[1].ToolUseID)
	assert.Equal(t, "text", last.Content[2].Type)
}

func TestExplicitFormatRefusesOtherInput(t *testing.T) {
	openaiReq, err := os.ReadFile(filepath.Join("..", "testdata", "openai.json"))
	require.NoError(t, err)
	anthropicReq, err := os.ReadFile(filepath.Join("..", "testdata", "anthropic.json"))
	require.NoError(t, err)
	codex, err := os.ReadFile(filepath.Join("..", "testdata", "codex.jsonl"))
	require.NoError(t, err)
	oneLine := func(b []byte) []byte {
		var buf bytes.Buffer
		require.NoError(t, json.Compact(&buf, b))
		return buf.Bytes()
	}
	cases := []struct {
		name, format string
		input        []byte
		looks        string
	}{
		{"openai as claude-code", formats.ClaudeCode, oneLine(openaiReq), formats.OpenAI},
		{"openai as anthropic", formats.Anthropic, openaiReq, formats.OpenAI},
		{"anthropic as openai", formats.OpenAI, anthropicReq, formats.Anthropic},
		{"codex as canonical", formats.Canonical, codex, formats.Codex},
		{"codex as copilot", formats.Copilot, codex, formats.Codex},
		{"anthropic as swe-agent", formats.SWEAgent, anthropicReq, formats.Anthropic},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := formats.Read(bytes.NewReader(c.input), c.format)
			assert.Nil(t, s)
			var me *formats.MismatchError
			require.ErrorAs(t, err, &me)
			assert.ErrorIs(t, err, formats.ErrFormatMismatch)
			assert.Equal(t, c.looks, me.Looks)
			assert.Contains(t, err.Error(), "--format "+c.looks)
		})
	}
}

func TestUnknownShapeIsRefused(t *testing.T) {
	gemini := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	s, err := formats.Read(bytes.NewReader(gemini), "")
	assert.Nil(t, s)
	require.ErrorIs(t, err, formats.ErrUnknownFormat)
	for _, name := range formats.Names() {
		assert.Contains(t, err.Error(), name)
	}
	assert.Contains(t, err.Error(), "--format")
	assert.Contains(t, err.Error(), `"contents"`, "the error should say what the input holds")

	// Named, no format takes it either.
	for _, f := range formats.Names() {
		s, err := formats.Read(bytes.NewReader(gemini), f)
		assert.Error(t, err, "read as %s", f)
		assert.Nil(t, s, "read as %s", f)
	}
	_, err = formats.Read(bytes.NewReader(gemini), "gemini")
	require.ErrorIs(t, err, formats.ErrUnknownFormat)
	assert.Contains(t, err.Error(), strings.Join(formats.Names(), ", "))
}

func TestNamesAreReadable(t *testing.T) {
	names := formats.Names()
	require.Subset(t, names, []string{"canonical", "anthropic", "openai", "claude-code", "codex", "copilot",
		"mini-swe-agent", "swe-agent", "cline", "gemini-cli", "opencode", "aider"})
	names[0] = "changed"
	assert.NotEqual(t, "changed", formats.Names()[0], "Names must return a copy")
	for _, f := range formats.Names() {
		_, err := formats.Read(strings.NewReader(""), f)
		assert.False(t, errors.Is(err, formats.ErrUnknownFormat), "%s: %v", f, err)
	}
}
