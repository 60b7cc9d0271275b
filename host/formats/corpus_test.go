package formats

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/cputime"
)

// Expected figures. Tool calls, user turns, message counts of the sources
// and largest results come from the corpus README or were counted from the
// raw files independently of this package; usage counts are the number of
// distinct API responses (Claude Code message.id values, Codex token_count
// events that follow a response, mini-swe-agent responses).
type corpusCase struct {
	dir        string // "" for ../shared/corpus, else the folder of ../shared
	file       string
	format     string
	messages   int
	calls      int
	userTexts  int // user messages other than tool results
	assistants int
	missing    int // calls without a recorded result
	maxResult  int // characters of the largest tool result
	usage      int
	compacted  int
}

var corpus = []corpusCase{
	{"", "claude-code-go-cli.jsonl", ClaudeCode, 218, 119, 6, 93, 0, 54581, 93, 0},
	{"", "claude-code-swift-app.jsonl", ClaudeCode, 123, 84, 3, 61, 1, 42978, 61, 1},
	{"", "codex-typescript.jsonl", Codex, 379, 311, 16, 183, 0, 40211, 183, 2},
	{"", "copilot-cli.jsonl", Copilot, 114, 61, 4, 56, 0, 15168, 0, 0},
	{"", "mini-swe-agent-django.traj.json", MiniSWEAgent, 314, 156, 1, 156, 1, 9310, 156, 0},
	{"", "swe-agent-pydicom.traj", SWEAgent, 26, 0, 13, 12, 0, 0, 0, 0},
}

// path returns the case's file, skipping the test when it is absent.
func (c corpusCase) path(tb testing.TB) string {
	if c.dir == "" {
		return corpusPath(tb, c.file)
	}
	return corpusNewPath(tb, c.file)
}

func TestCorpus(t *testing.T) {
	for _, c := range append(corpus, corpusNew...) {
		t.Run(c.file, func(t *testing.T) {
			path := c.path(t)
			s, err := ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, c.format, s.Format)
			checkPairs(t, s.Messages)
			st := countStats(s.Messages)
			got := []int{len(s.Messages), st.calls, st.results, st.userTexts, st.assistants, s.Repaired[RepairMissingResult], st.maxResult, st.usage, len(s.AgentCompactions)}
			want := []int{c.messages, c.calls, c.calls, c.userTexts, c.assistants, c.missing, c.maxResult, c.usage, c.compacted}
			assert.Equal(t, want, got, "messages, calls, results, user texts, assistants, missing, max result, usage, compactions")
			for _, k := range []string{RepairOrphanResult, RepairDuplicateCallID, RepairMisplacedBlock, RepairDuplicateMessageID} {
				assert.Zero(t, s.Repaired[k], "Repaired[%s]", k)
			}
			for i, m := range s.Messages {
				leading := i == 0 || s.Messages[i-1].Role == abi.RoleSystem && s.Messages[i-1].Pinned
				if m.Role == abi.RoleSystem && leading {
					assert.True(t, m.Pinned, "leading system message %d is not pinned", i)
				}
			}
			// Reading is deterministic: same IDs, same everything.
			again, err := ReadFile(path)
			require.NoError(t, err)
			assert.True(t, assert.ObjectsAreEqual(s, again), "two reads of the same file differ")
			// Detection works on the head Read uses and on a short one.
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			for _, n := range []int{detectSize, 4096} {
				f, err := Detect(data[:min(n, len(data))])
				assert.NoError(t, err, "Detect(first %d bytes)", n)
				assert.Equal(t, c.format, f, "Detect(first %d bytes)", n)
			}
		})
	}
}

func TestCorpusClaudeCodeCompaction(t *testing.T) {
	s, err := ReadFile(corpusPath(t, "claude-code-swift-app.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, s.AgentCompactions)
	c := s.AgentCompactions[0]
	assert.True(t, strings.HasPrefix(c.Summary, "This session is being continued from a previous conversation"), "summary starts %q", c.Summary[:min(60, len(c.Summary))])
	assert.GreaterOrEqual(t, len(c.Summary), 15000)
	assert.LessOrEqual(t, len(c.Summary), 20000)
	assert.Equal(t, "auto", c.Trigger)
	assert.Equal(t, 173411, c.PreTokens)
	assert.Equal(t, "27671858-fcfc-416c-86a1-3b04a6e1129c", c.ID)
	for _, m := range s.Messages {
		assert.NotContains(t, textOf(m.Content, abi.BlockText), "This session is being continued", "the agent's summary is in Messages (%s)", m.ID)
	}
	// The call interrupted by the compaction gets its result before the
	// boundary; the first kept message is the agent resuming.
	before, kept := s.Messages[c.FirstKept-1], s.Messages[c.FirstKept]
	assert.Equal(t, abi.Block{Type: abi.BlockToolResult, ToolUseID: before.Content[0].ToolUseID, Text: MissingResultText, IsError: true}, before.Content[0],
		"message before the boundary")
	assert.Equal(t, abi.RoleAssistant, kept.Role, "first kept message")
	assert.Equal(t, "0c4f2f2e-2d9f-4211-85a5-86de639ac423", kept.ID, "first kept message")
}

func TestCorpusCodexCompactions(t *testing.T) {
	s, err := ReadFile(corpusPath(t, "codex-typescript.jsonl"))
	require.NoError(t, err)
	prev := 0
	for i, c := range s.AgentCompactions {
		assert.Greater(t, c.FirstKept, prev, "compaction %d: FirstKept", i)
		assert.LessOrEqual(t, c.FirstKept, len(s.Messages), "compaction %d: FirstKept", i)
		prev = c.FirstKept
		if assert.NotEmpty(t, c.Replacement, "compaction %d: replacement history", i) {
			assert.Equal(t, abi.RoleUser, c.Replacement[0].Role, "compaction %d", i)
			assert.True(t, strings.HasPrefix(c.Replacement[0].Content[0].Text, "create orphan dogfood branch"), "compaction %d: replacement history %+v", i, c.Replacement[0])
		}
		assert.NoError(t, Validate(c.Replacement), "compaction %d: replacement", i)
	}
	assert.Equal(t, 2, s.Skipped["compaction (encrypted)"], "encrypted summaries skipped")
	// The system prompt comes from session_meta.
	m := s.Messages[0]
	assert.Equal(t, abi.RoleSystem, m.Role)
	assert.True(t, m.Pinned)
	assert.True(t, strings.HasPrefix(m.Content[0].Text, "You are Codex"), "first message %.60q", m.Content[0].Text)
	// Usage: input excludes the cached part.
	m = s.Messages[5]
	require.NotNil(t, m.Usage)
	assert.Equal(t, abi.Usage{InputTokens: 19634 - 2432, CacheReadTokens: 2432, OutputTokens: 624}, *m.Usage, "usage of the first response")
}

func TestCorpusSkipped(t *testing.T) {
	cases := []struct {
		file string
		want map[string]int
	}{
		{"claude-code-go-cli.jsonl", map[string]int{"progress": 140, "file-history-snapshot": 8}},
		{"copilot-cli.jsonl", map[string]int{"system.message (repeated)": 3, "tool.execution_start": 61, "hook.start": 84}},
		{"mini-swe-agent-django.traj.json", map[string]int{"role/exit": 1}},
	}
	for _, c := range cases {
		s, err := ReadFile(corpusPath(t, c.file))
		require.NoError(t, err)
		for k, v := range c.want {
			assert.Equal(t, v, s.Skipped[k], "%s: Skipped[%q]", c.file, k)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	for _, c := range append(corpus, corpusNew...) {
		b.Run(c.file, func(b *testing.B) {
			data, err := os.ReadFile(c.path(b))
			require.NoError(b, err)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu := cputime.Process()
			for b.Loop() {
				_, err := Read(bytes.NewReader(data), "")
				require.NoError(b, err)
			}
			// MB/s of process CPU time: steadier than wall time on a
			// shared machine (it counts the garbage collector's work too).
			if now := cputime.Process(); cpu >= 0 && now > cpu {
				b.ReportMetric(float64(len(data))*float64(b.N)/1e6/(now-cpu).Seconds(), "cpu-MB/s")
			}
		})
	}
}

// BenchmarkRequest reads each corpus session written as an Anthropic and
// an OpenAI request and writes it back into itself, as the CLI and the API
// do with a compacted request.
func BenchmarkRequest(b *testing.B) {
	for _, c := range corpus {
		s, err := ReadFile(corpusPath(b, c.file))
		require.NoError(b, err)
		for _, format := range []string{Anthropic, OpenAI} {
			var body bytes.Buffer
			require.NoError(b, Write(&body, format, s.Messages))
			b.Run(format+"/"+c.file, func(b *testing.B) {
				b.SetBytes(int64(body.Len()))
				b.ReportAllocs()
				for b.Loop() {
					r, err := Read(bytes.NewReader(body.Bytes()), format)
					require.NoError(b, err)
					require.NoError(b, r.Request.Write(io.Discard, r.Messages))
				}
			})
		}
	}
}
