package formats

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// describe renders a message compactly for comparisons.
func describe(m abi.Message) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s", m.Role, m.ID)
	if m.Pinned {
		sb.WriteString(" pinned")
	}
	sb.WriteString(":")
	for _, b := range m.Content {
		switch b.Type {
		case abi.BlockToolUse:
			fmt.Fprintf(&sb, " tool_use(%s %s %s)", b.ID, b.Name, b.Input)
		case abi.BlockToolResult:
			e := ""
			if b.IsError {
				e = " error"
			}
			fmt.Fprintf(&sb, " tool_result(%s%s %q)", b.ToolUseID, e, b.Text)
		case abi.BlockImage:
			fmt.Fprintf(&sb, " image(%s %d bytes)", b.MediaType, len(b.Data))
		default:
			fmt.Fprintf(&sb, " %s(%q)", b.Type, b.Text)
		}
	}
	if u := m.Usage; u != nil {
		fmt.Fprintf(&sb, " usage(in=%d out=%d cr=%d cw=%d)", u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens)
	}
	return sb.String()
}

func describeAll(msgs []abi.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = describe(m)
	}
	return out
}

// diffLines compares message descriptions one by one, so a failure names
// the messages that differ rather than printing two whole sessions.
func diffLines(t *testing.T, got, want []string) {
	t.Helper()
	assert.Len(t, got, len(want), "messages")
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		assert.Equal(t, w, g, "message %d", i)
	}
}

var missing = fmt.Sprintf("%q", MissingResultText)

func TestReadFixtures(t *testing.T) {
	cases := []struct {
		file     string
		format   string
		want     []string
		skipped  map[string]int
		repaired map[string]int
	}{
		{
			file:   "claude-code.jsonl",
			format: ClaudeCode,
			want: []string{
				`user u1: text("Fix the failing test in calc.go")`,
				// Three lines of one API response (msg_1) merge; the usage of the last line wins.
				`assistant a1: thinking("Look at the file first.") tool_use(t1 Read {"file_path":"calc.go"}) tool_use(t2 Grep {"pattern":"Add("}) usage(in=3 out=57 cr=0 cw=100)`,
				// Results interleaved with those lines gather after the merged message.
				`user r1: tool_result(t1 "package calc\nfunc Add(a, b int) int { return a - b }") tool_result(t2 "calc.go:2\ncalc_test.go:5")`,
				`assistant a4: text("Add subtracts; fixing it.") usage(in=5 out=9 cr=100 cw=20)`,
				`assistant a5: tool_use(t3 Edit {"file_path":"calc.go","old_string":"a - b","new_string":"a + b"})`,
				`user a5-results: tool_result(t3 error ` + missing + `)`,
				`user u2: text("continue")`,
				`assistant a6: text("Done.") usage(in=1 out=4 cr=300 cw=2)`,
			},
			skipped:  map[string]int{"file-history-snapshot": 1, "progress": 2},
			repaired: map[string]int{RepairMissingResult: 1},
		},
		{
			file:   "codex.jsonl",
			format: Codex,
			want: []string{
				`system codex-1 pinned: text("You are a coding agent.")`,
				`system codex-2 pinned: text("<permissions>full</permissions>")`,
				`user codex-3: text("list the files and add a README")`,
				`assistant rs_1: thinking("Plan: ls, then patch.") text("Looking first.") tool_use(c1 exec_command {"cmd":"ls"}) tool_use(c2 apply_patch {"input":"*** Begin Patch\n*** Add File: README.md\n+hi\n*** End Patch"}) usage(in=200 out=50 cr=800 cw=0)`,
				`user codex-10: tool_result(c1 "main.go\n") tool_result(c2 "Success. Updated the following files:\nA README.md\n")`,
				`assistant msg_2: text("Added README.md.") usage(in=200 out=10 cr=1000 cw=0)`,
				`user codex-19: text("now run the tests")`,
				`assistant fc_2: tool_use(c3 exec_command {"cmd":"go test ./..."})`,
				`user fc_2-results: tool_result(c3 error ` + missing + `)`,
			},
			skipped:  map[string]int{"event_msg/user_message": 1, "turn_context": 1, "event_msg/patch_apply_end": 1, "event_msg/token_count (unattributed)": 1, "event_msg/context_compacted": 1, "event_msg/turn_aborted": 1, "compaction (encrypted)": 1},
			repaired: map[string]int{RepairMissingResult: 1},
		},
		{
			file:   "copilot.jsonl",
			format: Copilot,
			want: []string{
				`system e1 pinned: text("You are the CLI assistant.")`,
				`user e2: text("<current_datetime>now</current_datetime>\n\ncheck the repo")`,
				`assistant e4: thinking("Status first.") text("Looking.") tool_use(k1 bash {"command":"git status"}) tool_use(k2 view {"path":"MISSING.md"})`,
				// Results in the order they completed: valid as it is.
				`user e7: tool_result(k2 error "Path does not exist") tool_result(k1 "clean")`,
				`user e12: text("thanks")`,
				`assistant e13: text("You're welcome.")`,
			},
			skipped:  map[string]int{"session.start": 1, "assistant.turn_start": 1, "assistant.turn_end": 1, "tool.execution_start": 2, "hook.start": 1, "system.message (repeated)": 1},
			repaired: map[string]int{},
		},
		{
			file:   "mini-swe-agent.traj.json",
			format: MiniSWEAgent,
			want: []string{
				`system mini-swe-agent-0 pinned: text("You are a helpful assistant that can interact with a computer shell.")`,
				`user mini-swe-agent-1: text("<pr_description>Fix the crash</pr_description>")`,
				`assistant mini-swe-agent-2: text("Let me look.") tool_use(call_1 bash {"command":"ls"}) usage(in=100 out=20 cr=900 cw=0)`,
				`user mini-swe-agent-3: tool_result(call_1 "<returncode>0</returncode>\n<output>\nsetup.py\n</output>")`,
				`assistant mini-swe-agent-4: text("Submitting.") tool_use(call_2 bash {"command":"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}) usage(in=1100 out=5 cr=0 cw=0)`,
				`user mini-swe-agent-4-results: tool_result(call_2 error ` + missing + `)`,
			},
			skipped:  map[string]int{"role/exit": 1},
			repaired: map[string]int{RepairMissingResult: 1},
		},
		{
			file:   "mini-swe-agent-v1.traj.json",
			format: MiniSWEAgent,
			want: []string{
				`system mini-swe-agent-0 pinned: text("You are a helpful assistant.")`,
				`user mini-swe-agent-1: text("Please solve this issue: the build fails.")`,
				"assistant mini-swe-agent-2: text(\"THOUGHT: look around.\\n\\n```bash\\nls\\n```\")",
				`user mini-swe-agent-3: text("<returncode>0</returncode>\n<output>\nMakefile\n</output>")`,
			},
			skipped:  map[string]int{},
			repaired: map[string]int{},
		},
		{
			file:   "swe-agent.traj",
			format: SWEAgent,
			want: []string{
				`system swe-agent-0 pinned: text("SETTING: You are an autonomous programmer.")`,
				`user swe-agent-1: text("DEMONSTRATION: ...")`,
				`user swe-agent-2: text("ISSUE: the build fails")`,
				"assistant swe-agent-3: text(\"Let me look.\\n\\n```\\nls\\n```\")",
				`user swe-agent-4: text("setup.py\n(Open file: n/a)\nbash-$")`,
			},
			skipped:  map[string]int{"history/agent reviewer": 1},
			repaired: map[string]int{},
		},
		{
			file:   "swe-agent-fc.traj",
			format: SWEAgent,
			want: []string{
				`system swe-agent-0 pinned: text("You are a helpful assistant that can interact with a computer.")`,
				`user swe-agent-1: text("<uploaded_files>/repo</uploaded_files> fix the bug")`,
				`assistant swe-agent-2: text("Let me look.") tool_use(toolu_1 str_replace_editor {"command":"view","path":"/repo"})`,
				`user swe-agent-3: tool_result(toolu_1 "Here's the files and directories up to 2 levels deep in /repo")`,
				`assistant swe-agent-4: text("Submitting.") tool_use(toolu_2 submit {})`,
				`user swe-agent-5: tool_result(toolu_2 "diff --git a/x b/x")`,
			},
			skipped:  map[string]int{},
			repaired: map[string]int{},
		},
		{
			file:   "anthropic.json",
			format: Anthropic,
			want: []string{
				`system anthropic-system pinned: text("You are terse.")`,
				`user anthropic-0: text("What is in /tmp?")`,
				`assistant anthropic-1: thinking("List it.") tool_use(toolu_1 ls {"path":"/tmp"}) tool_use(toolu_2 du {"path":"/tmp"})`,
				`user anthropic-2: tool_result(toolu_2 "4K") tool_result(toolu_1 "a.txt") image(image/png 8 bytes)`,
				`assistant anthropic-3: text("a.txt, 4K.")`,
			},
			skipped:  map[string]int{},
			repaired: map[string]int{},
		},
		{
			file:   "openai.json",
			format: OpenAI,
			want: []string{
				`system openai-0 pinned: text("You are terse.")`,
				`user openai-1: text("What is in /tmp?") image(image/png 8 bytes)`,
				`assistant openai-2: tool_use(call_1 ls {"path":"/tmp"}) tool_use(call_2 du {"path":"/tmp"})`,
				`user openai-3: tool_result(call_1 "a.txt") tool_result(call_2 "4K")`,
				`assistant openai-5: thinking("Both came back.") text("a.txt, 4K.")`,
			},
			skipped:  map[string]int{},
			repaired: map[string]int{},
		},
		{
			file:   "canonical.jsonl",
			format: Canonical,
			want: []string{
				`system m1 pinned: text("Rules.")`,
				`user m2: text("Start.")`,
				`assistant m3: tool_use(tu1 run {"cmd":"make"}) usage(in=10 out=3 cr=0 cw=0)`,
				`user m4: tool_result(tu1 "ok")`,
				`assistant m5: text("Built.")`,
			},
			skipped:  map[string]int{"session": 1},
			repaired: map[string]int{},
		},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			data := fixture(t, c.file)
			f, err := Detect(data)
			assert.NoError(t, err)
			assert.Equal(t, c.format, f, "Detect")
			s, err := Read(bytes.NewReader(data), "")
			require.NoError(t, err)
			assert.Equal(t, c.format, s.Format)
			diffLines(t, describeAll(s.Messages), c.want)
			checkPairs(t, s.Messages)
			assert.Equal(t, c.skipped, s.Skipped, "Skipped")
			assert.Equal(t, c.repaired, s.Repaired, "Repaired")
		})
	}
}

func TestReadFixtureCompactions(t *testing.T) {
	s, err := Read(bytes.NewReader(fixture(t, "claude-code.jsonl")), ClaudeCode)
	require.NoError(t, err)
	want := []AgentCompaction{{ID: "cb1", Summary: "This session is being continued from a previous conversation. Summary: fixing Add in calc.go.",
		FirstKept: 6, Trigger: "auto", PreTokens: 150000, Line: 13, Bytes: 214 + 256}}
	assert.Equal(t, want, s.AgentCompactions, "claude-code compactions")
	// The sidechain line is a subagent's, kept apart from the conversation.
	require.Len(t, s.Subagents, 1)
	require.Len(t, s.Subagents[0].Messages, 1)
	assert.Equal(t, "subagent chatter", s.Subagents[0].Messages[0].Content[0].Text)

	s, err = Read(bytes.NewReader(fixture(t, "codex.jsonl")), Codex)
	require.NoError(t, err)
	require.Len(t, s.AgentCompactions, 1, "codex compactions")
	c := s.AgentCompactions[0]
	assert.Equal(t, "codex-16", c.ID)
	assert.Equal(t, 6, c.FirstKept)
	assert.Empty(t, c.Summary, "Codex encrypts its summary")
	diffLines(t, describeAll(c.Replacement), []string{`user codex-16-r0: text("list the files and add a README")`})

	s, err = Read(bytes.NewReader(fixture(t, "canonical.jsonl")), Canonical)
	require.NoError(t, err)
	require.Len(t, s.LogCompactions, 1)
	assert.Equal(t, 4, s.LogCompactions[0].At)
	assert.Equal(t, `{"type":"compaction","id":"c1","first_kept":"m5","summary":"Ran make."}`, string(s.LogCompactions[0].Entry))
}

func TestDetect(t *testing.T) {
	cases := []struct {
		head string
		want string
	}{
		{`{"type":"session_meta","payload":{}}`, Codex},
		{`{"timestamp":"x","type":"response_item","payload":{"type":"message"`, Codex},
		{`{"type":"session.start","data":{}}`, Copilot},
		{`{"parentUuid":null,"isSidechain":false,"message":{"content":"` + strings.Repeat("x", 100), ClaudeCode},
		{`{"type":"summary","summary":"Title","leafUuid":"x"}`, ClaudeCode},
		{`{"type":"file-history-snapshot","messageId":"x"}`, ClaudeCode},
		{`{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}]}`, Canonical},
		{"{\"type\":\"header\",\"v\":1}\n{\"type\":\"message\",\"message\":{}}\n", Canonical},
		{`{"system":"s","messages":[{"role":"user","content":"hi"}]}`, Anthropic},
		{`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x"}]}]}`, Anthropic},
		{`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"x","content":"r"}]}`, OpenAI},
		{`{"messages":[{"role":"user","content":"hi"}]}`, OpenAI},
		{`{"info":{"config":{"agent":{"system_template":"` + strings.Repeat("x", 50), MiniSWEAgent},
		{`{"messages":[],"trajectory_format":"mini-swe-agent-1.1"}`, MiniSWEAgent},
		{"{\n  \"environment\": \"swe_main\",\n  \"trajectory\": [", SWEAgent},
		{"\xef\xbb\xbf  \n{\"history\":[]}", SWEAgent},
	}
	for _, c := range cases {
		got, err := Detect([]byte(c.head))
		assert.NoError(t, err, "Detect(%.60q)", c.head)
		assert.Equal(t, c.want, got, "Detect(%.60q)", c.head)
	}
	for _, head := range []string{"", "   ", "hello", "[1,2]", `{"a":1}`, "{\"x\":1}\n{\"y\":2}\n"} {
		got, err := Detect([]byte(head))
		assert.ErrorIs(t, err, ErrUnknownFormat, "Detect(%q) = %q", head, got)
	}
}
