package formats

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// corpusNew are the files of ../shared/corpus-new, with the figures of its
// README: message counts of the sources (a Gemini CLI message with tool
// calls is followed by one message of their results; an opencode step with
// tool calls likewise), tool calls, largest results in characters and the
// agents' own compactions. The Roo Code history holds 62 messages, one of
// them the agent's summary; its 22 calls are the XML tool calls that have a
// result header after them (new_task 2 of 6, update_todo_list 6,
// read_file 5, search_files 4, use_mcp_tool 3, switch_mode and
// attempt_completion 1 each). Aider's 24 prompts are 23 messages and an
// /undo. The Claude Code file's 136 assistant lines are 66 API responses.
var corpusNew = []corpusCase{
	{"corpus-new", "roo-code-task-restore.api_conversation_history.json", Cline, 61, 22, 10, 29, 0, 99669, 0, 1},
	{"corpus-new", "gemini-cli-repo-tooling.json", GeminiCLI, 13 + 118 + 105, 105, 13, 118, 0, 90847, 118, 0},
	{"corpus-new", "opencode-nextjs-site.json", OpenCode, 10 + 71 + 63, 79, 10, 71, 0, 51376, 71, 0},
	{"corpus-new", "aider-ts-monorepo.md", Aider, 66, 0, 23, 43, 0, 0, 0, 0},
	{"corpus-new", "claude-code-subagents-pr-review.jsonl", ClaudeCode, 155, 84, 5, 66, 0, 24015, 66, 0},
}

// TestCorpusNewWalk reads every file of ../shared/corpus-new: each is a
// case of corpusNew, or the Roo Code UI log, which is refused.
func TestCorpusNewWalk(t *testing.T) {
	dir, ok := findShared("corpus-new", "")
	if !ok {
		t.Skip("../shared/corpus-new not found above the module root; skipping")
	}
	known := map[string]bool{"roo-code-task-restore.ui_messages.json": true, "README.md": true}
	for _, c := range corpusNew {
		known[c.file] = true
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.True(t, known[e.Name()], "corpus-new/%s is not tested", e.Name())
	}
	_, err = ReadFile(corpusNewPath(t, "roo-code-task-restore.ui_messages.json"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "api_conversation_history.json")
}

func TestCorpusRooCodeCondensation(t *testing.T) {
	s, err := ReadFile(corpusNewPath(t, "roo-code-task-restore.api_conversation_history.json"))
	require.NoError(t, err)
	require.Len(t, s.AgentCompactions, 1)
	c := s.AgentCompactions[0]
	assert.Equal(t, 7918, utf8.RuneCountInString(c.Summary), "summary characters")
	assert.True(t, strings.HasPrefix(c.Summary, "### 1. Previous Conversation:"), "summary starts %.40q", c.Summary)
	assert.Equal(t, 1, c.FirstKept)
	live := s.Live()
	assert.Len(t, live, 62, "the live context: the summary, the first message and all after")
	names := map[string]int{}
	for _, m := range s.Messages {
		for _, b := range m.Content {
			if b.Type == abi.BlockToolUse {
				names[b.Name]++
			}
		}
	}
	assert.Equal(t, map[string]int{"new_task": 2, "update_todo_list": 6, "read_file": 5, "search_files": 4, "use_mcp_tool": 3, "switch_mode": 1, "attempt_completion": 1}, names)
}

func TestCorpusGeminiCLI(t *testing.T) {
	s, err := ReadFile(corpusNewPath(t, "gemini-cli-repo-tooling.json"))
	require.NoError(t, err)
	names := map[string]int{}
	thoughts, maxInput := 0, 0
	for _, m := range s.Messages {
		for _, b := range m.Content {
			switch b.Type {
			case abi.BlockToolUse:
				names[b.Name]++
			case abi.BlockThinking:
				thoughts += strings.Count("\n\n"+b.Text, "\n\n**")
			}
		}
		if m.Role == abi.RoleUser {
			for _, b := range m.Content {
				assert.NotEqual(t, abi.BlockThinking, b.Type, "thoughts in a user message")
			}
		}
		if m.Usage != nil {
			maxInput = max(maxInput, m.Usage.PromptTokens())
		}
	}
	for name, n := range map[string]int{"run_shell_command": 50, "replace": 16, "read_file": 14, "list_directory": 12, "write_file": 8} {
		assert.Equal(t, n, names[name], "calls of %s", name)
	}
	assert.Equal(t, 93, thoughts, "thoughts")
	assert.Equal(t, 101170, maxInput, "largest recorded prompt")
}

func TestCorpusOpenCode(t *testing.T) {
	s, err := ReadFile(corpusNewPath(t, "opencode-nextjs-site.json"))
	require.NoError(t, err)
	names := map[string]int{}
	reasoning, reasoningChars := 0, 0
	for _, m := range s.Messages {
		for _, b := range m.Content {
			switch b.Type {
			case abi.BlockToolUse:
				names[b.Name]++
			case abi.BlockThinking:
				reasoning++
				reasoningChars += utf8.RuneCountInString(b.Text)
			}
		}
	}
	// The README names the six most called tools; counted from the file,
	// the rest are grep, todowrite and question.
	assert.Equal(t, map[string]int{"read": 31, "edit": 13, "bash": 10, "webfetch": 7, "glob": 7, "write": 4, "grep": 3, "todowrite": 3, "question": 1}, names)
	assert.Equal(t, 61, reasoning, "reasoning parts")
	assert.Equal(t, 37561, reasoningChars, "reasoning characters")
	assert.Equal(t, 18, s.Skipped["part/patch"])
}

func TestCorpusAider(t *testing.T) {
	s, err := ReadFile(corpusNewPath(t, "aider-ts-monorepo.md"))
	require.NoError(t, err)
	blocks := 0
	for _, m := range s.Messages {
		if m.Role == abi.RoleAssistant {
			blocks += strings.Count(m.Content[0].Text, "<<<<<<< SEARCH")
		}
	}
	assert.Equal(t, 57, blocks, "SEARCH/REPLACE blocks in the answers")
	assert.Equal(t, 19, s.Skipped["aider chat started"])
	assert.Equal(t, 20, s.Skipped["console/applied edit"])
	assert.Equal(t, 1, s.Skipped["command/undo"])
}

func TestCorpusClaudeCodeSubagents(t *testing.T) {
	s, err := ReadFile(corpusNewPath(t, "claude-code-subagents-pr-review.jsonl"))
	require.NoError(t, err)
	require.Len(t, s.Subagents, 3)
	users, assistants := 0, 0
	for _, sub := range s.Subagents {
		for _, m := range sub.Messages {
			switch m.Role {
			case abi.RoleUser:
				users++
			case abi.RoleAssistant:
				assistants++
			}
		}
	}
	assert.Equal(t, []int{51, 48}, []int{users, assistants}, "subagent messages (user, assistant)")
}
