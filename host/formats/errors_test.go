package formats

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, format, input string
		line                int
		msg                 string // the whole error message
	}{
		{"not an object", Codex, "{\"type\":\"session_meta\",\"payload\":{}}\n\n[1,2]\n", 3,
			`input:3: codex: expected a JSON object, got "[1,2]"`},
		{"long garbage is cut", ClaudeCode, "{\"type\":\"progress\"}\n" + strings.Repeat("é", 50) + "\n", 2,
			`input:2: claude-code: expected a JSON object, got "` + strings.Repeat("é", 20) + `…"`},
		{"bad JSON mid-file", Copilot, "{\"type\":\"session.start\",\"data\":{}}\n{\"type\":\"user.message\",\n{\"type\":\"x\"}\n", 2,
			`input:2: copilot: invalid JSON at byte 23: unexpected end of JSON input`},
		{"payload not an object", Codex, `{"type":"response_item","payload":"x"}`, 1,
			`input:1: codex: response_item record: expected a JSON object in "payload"`},
		{"field of the wrong type", Codex, `{"type":"response_item","payload":{"type":"function_call","call_id":5}}`, 1,
			`input:1: codex: response_item: call_id: expected a string, got JSON number`},
		{"no type", ClaudeCode, `{"uuid":"x"}`, 1,
			`input:1: claude-code: expected a record with a "type"`},
		{"message without message", ClaudeCode, `{"type":"user","uuid":"x"}`, 1,
			`input:1: claude-code: user record without a message object`},
		{"canonical unknown block", Canonical, `{"role":"user","content":[{"type":"video"}]}`, 1,
			`input:1: canonical: content[0]: unknown block type "video"`},
		{"canonical unknown role", Canonical, `{"role":"tool","content":[]}`, 1,
			`input:1: canonical: unknown role "tool"`},
		{"canonical neither", Canonical, `{"id":"x"}`, 1,
			`input:1: canonical: expected a message (with "role") or a log entry (with "type")`},
		{"document syntax", Anthropic, "{\n \"messages\": [\n  {\"role\": \"user\",, }\n ]\n}", 3,
			`input:3: anthropic: invalid JSON at byte 36: invalid character ',' looking for beginning of object key string`},
		{"document not an object", OpenAI, "\n\n[]", 3,
			`input:3: openai: expected a JSON object, got "[]"`},
		{"document field type", MiniSWEAgent, `{"messages":[{"role":5}]}`, 1,
			`input:1: mini-swe-agent: messages.role: expected a string, got JSON number`},
		{"content type", Anthropic, `{"messages":[{"role":"user","content":5}]}`, 0,
			`input: anthropic: messages[0].content: expected a string or an array of blocks, got "5"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Read(strings.NewReader(c.input), c.format)
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			assert.Nil(t, s, "a malformed file returned a session")
			assert.NotErrorIs(t, err, ErrTornLine)
			assert.Equal(t, c.msg, err.Error())
			assert.Equal(t, c.line, pe.Line)
			assert.Equal(t, c.format, pe.Format)
		})
	}
}

func TestReadFileNamesTheFile(t *testing.T) {
	lines := strings.Repeat("{\"type\":\"event_msg\",\"payload\":{\"type\":\"task_started\"}}\n", 16)
	path := filepath.Join(t.TempDir(), "session.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(lines+"\"oops\"\n"), 0o600))
	_, err := ReadFile(path)
	require.Error(t, err)
	assert.Equal(t, path+`:17: codex: expected a JSON object, got "\"oops\""`, err.Error())
}

func TestTornLastLine(t *testing.T) {
	data := fixture(t, "claude-code.jsonl")
	torn := append(bytes.Clone(data), `{"parentUuid":"a6","isSidechain":false,"type":"user","message":{"role":"user","content":"and now the ot`...)
	s, err := Read(bytes.NewReader(torn), "")
	require.ErrorIs(t, err, ErrTornLine)
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 17, pe.Line, "the torn line")
	whole, err := Read(bytes.NewReader(data), "")
	require.NoError(t, err)
	require.NotNil(t, s)
	diffLines(t, describeAll(s.Messages), describeAll(whole.Messages))
	checkPairs(t, s.Messages)

	// The same cut followed by a newline is not a torn tail but a bad line.
	_, err = Read(bytes.NewReader(append(torn, '\n')), "")
	require.Error(t, err, "a terminated bad last line")
	assert.NotErrorIs(t, err, ErrTornLine, "a terminated bad last line")
	// A complete last line without a newline is fine.
	_, err = Read(bytes.NewReader(bytes.TrimRight(data, "\n")), "")
	assert.NoError(t, err, "an unterminated complete last line")
}

func TestLongLines(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 3<<20/16) // 3 MiB of output on one line
	input := `{"type":"response_item","payload":{"type":"function_call","name":"cat","arguments":"{}","call_id":"c1"}}` + "\n" +
		`{"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"` + big + `"}}` + "\r\n"
	s, err := Read(strings.NewReader(input), "")
	require.NoError(t, err)
	require.Len(t, s.Messages, 2)
	assert.True(t, s.Messages[1].Content[0].Text == big, "3 MiB result read back as %d bytes", len(s.Messages[1].Content[0].Text))

	if testing.Short() {
		t.Skip("skipping the 64 MiB line in -short mode")
	}
	huge := `{"type":"progress","data":"` + strings.Repeat("x", maxLineSize) + `"}`
	_, err = Read(strings.NewReader(huge), ClaudeCode)
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 1, pe.Line)
	assert.Contains(t, pe.Reason, "longer than 64 MiB")
}

func TestUnknownFormat(t *testing.T) {
	_, err := Read(strings.NewReader("{}"), "yaml")
	assert.ErrorIs(t, err, ErrUnknownFormat, "Read with an unknown format")
	_, err = Read(strings.NewReader(""), "")
	assert.ErrorIs(t, err, ErrUnknownFormat, "Read of empty input")
	assert.ErrorIs(t, Write(&bytes.Buffer{}, Codex, nil), ErrUnknownFormat, "Write codex")
}
