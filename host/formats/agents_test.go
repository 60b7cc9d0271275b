package formats

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

func thinking(s string) abi.Block { return abi.Block{Type: abi.BlockThinking, Text: s} }

func withUsage(m abi.Message, u abi.Usage) abi.Message {
	m.Usage = &u
	return m
}

// readFixture reads a testdata file with its format detected, and checks
// that naming the format gives the same session.
func readFixture(t *testing.T, name, format string) *Session {
	t.Helper()
	s, err := Read(bytes.NewReader(fixture(t, name)), "")
	require.NoError(t, err)
	require.Equal(t, format, s.Format)
	named, err := Read(bytes.NewReader(fixture(t, name)), format)
	require.NoError(t, err)
	assert.Equal(t, s, named, "read with --format %s", format)
	require.NoError(t, Validate(s.Messages))
	require.NoError(t, Validate(s.Live()))
	return s
}

func TestReadCline(t *testing.T) {
	s := readFixture(t, "cline.api_conversation_history.json", Cline)
	env := func(s string) abi.Block { return text("<environment_details>\n" + s + "\n</environment_details>") }
	task := msg("cline-0", abi.RoleUser, text("<task>\nfix the parser\n</task>"), env("# Current Time\n2025-09-13"))
	want := []abi.Message{
		task,
		// The call this answers was folded by the agent's condensation:
		// it stays text.
		msg("cline-2", abi.RoleUser, text("[attempt_completion] Result:"), text("<feedback>\nnot yet\n</feedback>"), env("x")),
		msg("cline-3", abi.RoleAssistant, text("I will read it.\n\n"), toolUse("cline-3-read_file", "read_file", `{"path":"src/parse.ts"}`)),
		msg("cline-4", abi.RoleUser, toolResult("cline-3-read_file", "1 | export function parse() {}"), env("y")),
		msg("cline-5", abi.RoleAssistant, toolUse("cline-5-execute_command", "execute_command", `{"command":"npm test"}`),
			text("\n\n[Response interrupted by a tool use result. Only one tool may be used at a time and should be placed at the end of the message.]")),
		msg("cline-6", abi.RoleUser, toolResult("cline-5-execute_command", "3 passing")),
		// No result header follows: the call stays text.
		msg("cline-7", abi.RoleAssistant, text("A note about <read_file> in prose, then a call whose result is missing.\n<new_task>\n<mode>code</mode>\n<message>do it</message>\n</new_task>")),
		msg("cline-8", abi.RoleUser, text("New instructions for task continuation:\n<user_message>go on</user_message>")),
	}
	assert.Equal(t, want, s.Messages)
	require.Len(t, s.AgentCompactions, 1)
	c := s.AgentCompactions[0]
	assert.Equal(t, AgentCompaction{ID: "cline-1", Summary: "Summary of the work so far: the parser drops trailing commas.", FirstKept: 1,
		Replacement: []abi.Message{task}}, c)
	live := s.Live()
	require.Len(t, live, 1+len(want))
	assert.True(t, live[0].Summary)
	assert.Equal(t, c.Summary, live[0].Content[0].Text)
	assert.Equal(t, want, live[1:], "the live context keeps the first message and all after the summary")
}

func TestXMLCallsStayTextUnlessExact(t *testing.T) {
	cases := []struct{ name, call, header string }{
		{"text between parameters", "<read_file>\n<path>a</path>\nstray\n</read_file>", "[read_file for 'a'] Result:"},
		{"unclosed call", "<read_file>\n<path>a</path>", "[read_file for 'a'] Result:"},
		{"another tool's result", "<read_file>\n<path>a</path>\n</read_file>", "[write_to_file for 'a'] Result:"},
		{"repeated parameter", "<read_file>\n<path>a</path><path>b</path>\n</read_file>", "[read_file for 'a'] Result:"},
		{"not at a line start", "see <read_file><path>a</path></read_file>", "[read_file for 'a'] Result:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs := []abi.Message{
				msg("a", abi.RoleAssistant, text(c.call)),
				msg("u", abi.RoleUser, text(c.header), text("out")),
			}
			want := []abi.Message{msgs[0], msgs[1]}
			want[0].Content = append([]abi.Block(nil), msgs[0].Content...)
			want[1].Content = append([]abi.Block(nil), msgs[1].Content...)
			pairXMLTools(msgs)
			assert.Equal(t, want, msgs)
		})
	}
}

func TestClineUIMessagesRefused(t *testing.T) {
	data := fixture(t, "roo.ui_messages.json")
	for _, format := range []string{"", Cline} {
		_, err := Read(bytes.NewReader(data), format)
		require.Error(t, err, "format %q", format)
		assert.Contains(t, err.Error(), "ui_messages.json", "format %q", format)
		assert.Contains(t, err.Error(), "read api_conversation_history.json in the same task folder instead", "format %q", format)
	}
}

func TestReadGeminiCLI(t *testing.T) {
	s := readFixture(t, "gemini-cli.json", GeminiCLI)
	want := []abi.Message{
		msg("u1", abi.RoleUser, text("where is the history saved?")),
		withUsage(msg("g1", abi.RoleAssistant,
			thinking("**Locating history**\nCheck ~/.gemini first."),
			text("I will look."),
			toolUse("ls-1", "list_directory", `{"dir_path":"/home/u/.gemini"}`),
			toolUse("rf-1", "read_file", `{"file_path":"/x"}`)),
			abi.Usage{InputTokens: 6658 - 3081, CacheReadTokens: 3081, OutputTokens: 42 + 138}),
		msg("g1-results", abi.RoleUser, toolResult("ls-1", "[DIR] tmp\nsettings.json"),
			abi.Block{Type: abi.BlockToolResult, ToolUseID: "rf-1", Text: "EACCES", IsError: true}),
		withUsage(msg("g2", abi.RoleAssistant, text("It is in ~/.gemini/tmp.")), abi.Usage{InputTokens: 7000, OutputTokens: 10}),
	}
	assert.Equal(t, want, s.Messages)
	assert.Equal(t, map[string]int{"type/info": 1}, s.Skipped)
}

func TestReadOpenCode(t *testing.T) {
	s := readFixture(t, "opencode.json", OpenCode)
	want := []abi.Message{
		msg("msg_u1", abi.RoleUser, text("add a footer button"), text("Called the Read tool on footer.tsx")),
		withUsage(msg("msg_a1", abi.RoleAssistant, thinking("Read the file first."),
			toolUse("call_1", "read", `{"filePath":"/w/footer.tsx"}`),
			toolUse("call_2", "grep", `{"pattern":"x"}`)),
			abi.Usage{InputTokens: 8514, OutputTokens: 132 + 52, CacheReadTokens: 100, CacheWriteTokens: 7}),
		msg("msg_a1-results", abi.RoleUser, toolResult("call_1", "<file>export {}</file>"),
			abi.Block{Type: abi.BlockToolResult, ToolUseID: "call_2", Text: "Ripgrep JSON record exceeded 65536 bytes", IsError: true}),
		withUsage(msg("msg_a1-step-1", abi.RoleAssistant, toolUse("call_3", "edit", `{"filePath":"/w/footer.tsx","oldString":"a","newString":"b"}`)),
			abi.Usage{InputTokens: 9000, OutputTokens: 20, CacheReadTokens: 8000}),
		msg("msg_a1-step-1-results", abi.RoleUser, toolResult("call_3", "Edit applied.")),
		withUsage(msg("msg_a1-step-2", abi.RoleAssistant, text("Done.")), abi.Usage{InputTokens: 9100, OutputTokens: 5, CacheReadTokens: 9000}),
	}
	assert.Equal(t, want, s.Messages)
	assert.Equal(t, map[string]int{"part/patch": 1}, s.Skipped)
}

func TestReadAider(t *testing.T) {
	s := readFixture(t, "aider.chat.history.md", Aider)
	want := []abi.Message{
		msg("aider-7", abi.RoleUser, text("What does this package do?")),
		msg("aider-9", abi.RoleAssistant, text("It parses dates.")),
		msg("aider-15", abi.RoleUser, text("fix the bug in parse.ts\nkeep the API")),
		msg("aider-20", abi.RoleAssistant, text("Here is the fix:\n\nparse.ts\n```\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n```")),
		msg("aider-37", abi.RoleUser, text("why did it fail?")),
		msg("aider-39", abi.RoleAssistant, text("Because of the trailing comma.")),
	}
	assert.Equal(t, want, s.Messages)
	assert.Equal(t, map[string]int{"aider chat started": 2, "console": 7, "console/applied edit": 1, "command/undo": 1}, s.Skipped)

	_, err := Read(bytes.NewReader([]byte("just some notes\n")), Aider)
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, err.Error(), "not an Aider chat history")
}

func TestMiniSWEAgentSubmissionIsNotARequest(t *testing.T) {
	s := readFixture(t, "mini-swe-agent-v1-submission.traj.json", MiniSWEAgent)
	require.Len(t, s.Messages, 5)
	last := s.Messages[len(s.Messages)-1]
	assert.Equal(t, abi.RoleAssistant, last.Role, "the submission, never sent to the model, is not read as a user message")
	assert.Equal(t, 1, s.Skipped["submission"])
	req, ok := abi.RequestText(s.Messages[1])
	require.True(t, ok)
	for _, m := range s.Messages[2:] {
		if m.Role == abi.RoleUser {
			assert.True(t, abi.IsObservation(nil, &m), "user message %s after the task is command output", m.ID)
		}
	}
	assert.Contains(t, req, "fix f.py")

	// An observation that was sent stays.
	s = readFixture(t, "mini-swe-agent-v1.traj.json", MiniSWEAgent)
	assert.Equal(t, abi.RoleUser, s.Messages[len(s.Messages)-1].Role)
	assert.Zero(t, s.Skipped["submission"])
}

func TestDetectAgentRecordings(t *testing.T) {
	cases := []struct{ file, format string }{
		{"cline.api_conversation_history.json", Cline},
		{"gemini-cli.json", GeminiCLI},
		{"opencode.json", OpenCode},
		{"aider.chat.history.md", Aider},
		// A mini-swe-agent trajectory also opens with "info".
		{"mini-swe-agent.traj.json", MiniSWEAgent},
	}
	for _, c := range cases {
		data := fixture(t, c.file)
		for _, n := range []int{len(data), 200, 120} {
			f, err := Detect(data[:min(n, len(data))])
			if assert.NoError(t, err, "%s, first %d bytes", c.file, n) {
				assert.Equal(t, c.format, f, "%s, first %d bytes", c.file, n)
			}
		}
	}
	_, err := Detect([]byte(`[{"ts":1,"type":"say","say":"text"}]`))
	assert.True(t, errors.Is(err, ErrUnknownFormat))
	assert.Contains(t, err.Error(), "api_conversation_history.json")
	_, err = Detect([]byte(`[1, 2]`))
	assert.True(t, errors.Is(err, ErrUnknownFormat))
}

// An opencode compaction: the user's compaction request (a part with no
// text) and the assistant's summary message become an AgentCompaction; the
// live context is the summary and what followed.
func TestReadOpenCodeCompaction(t *testing.T) {
	doc := `{"info": {"id": "ses_1", "projectID": "p", "directory": "/w"}, "messages": [
	  {"info": {"id": "u1", "role": "user"}, "parts": [{"type": "text", "text": "fix the footer"}]},
	  {"info": {"id": "a1", "role": "assistant"}, "parts": [{"type": "step-start"}, {"type": "text", "text": "Fixed."}]},
	  {"info": {"id": "u2", "role": "user"}, "parts": [{"type": "compaction", "auto": true}]},
	  {"info": {"id": "a2", "role": "assistant", "summary": true}, "parts": [{"type": "step-start"}, {"type": "text", "text": "We fixed the footer."}]},
	  {"info": {"id": "u3", "role": "user"}, "parts": [{"type": "text", "text": "now the header"}]}
	]}`
	s, err := Read(bytes.NewReader([]byte(doc)), "")
	require.NoError(t, err)
	require.Equal(t, OpenCode, s.Format)
	assert.Equal(t, []abi.Message{
		msg("u1", abi.RoleUser, text("fix the footer")),
		msg("a1", abi.RoleAssistant, text("Fixed.")),
		msg("u3", abi.RoleUser, text("now the header")),
	}, s.Messages)
	require.Len(t, s.AgentCompactions, 1)
	assert.Equal(t, AgentCompaction{ID: "a2", Summary: "We fixed the footer.", FirstKept: 2}, s.AgentCompactions[0])
	live := s.Live()
	require.Len(t, live, 2)
	assert.True(t, live[0].Summary)
	assert.Equal(t, "u3", live[1].ID)
	assert.Equal(t, 1, s.Skipped["part/compaction"])
}
