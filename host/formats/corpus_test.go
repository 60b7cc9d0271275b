package formats

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
)

// Expected figures. Tool calls, user turns, message counts of the sources
// and largest results come from the corpus README or were counted from the
// raw files independently of this package; usage counts are the number of
// distinct API responses (Claude Code message.id values, Codex token_count
// events that follow a response, mini-swe-agent responses).
var corpus = []struct {
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
}{
	{"claude-code-go-cli.jsonl", ClaudeCode, 218, 119, 6, 93, 0, 54581, 93, 0},
	{"claude-code-swift-app.jsonl", ClaudeCode, 123, 84, 3, 61, 1, 42978, 61, 1},
	{"codex-typescript.jsonl", Codex, 379, 311, 16, 183, 0, 40211, 183, 2},
	{"copilot-cli.jsonl", Copilot, 114, 61, 4, 56, 0, 15168, 0, 0},
	{"mini-swe-agent-django.traj.json", MiniSWEAgent, 314, 156, 1, 156, 1, 9310, 156, 0},
	{"swe-agent-pydicom.traj", SWEAgent, 26, 0, 13, 12, 0, 0, 0, 0},
}

func TestCorpus(t *testing.T) {
	for _, c := range corpus {
		t.Run(c.file, func(t *testing.T) {
			path := corpusPath(t, c.file)
			s, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if s.Format != c.format {
				t.Errorf("format %q, want %q", s.Format, c.format)
			}
			checkPairs(t, s.Messages)
			st := countStats(s.Messages)
			got := []int{len(s.Messages), st.calls, st.results, st.userTexts, st.assistants, s.Repaired[RepairMissingResult], st.maxResult, st.usage, len(s.AgentCompactions)}
			want := []int{c.messages, c.calls, c.calls, c.userTexts, c.assistants, c.missing, c.maxResult, c.usage, c.compacted}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("messages, calls, results, user texts, assistants, missing, max result, usage, compactions =\n%v, want\n%v", got, want)
			}
			for _, k := range []string{RepairOrphanResult, RepairDuplicateCallID, RepairMisplacedBlock, RepairDuplicateMessageID} {
				if s.Repaired[k] != 0 {
					t.Errorf("Repaired[%s] = %d, want 0", k, s.Repaired[k])
				}
			}
			for i, m := range s.Messages {
				if m.Role == abi.RoleSystem && !m.Pinned && (i == 0 || s.Messages[i-1].Role == abi.RoleSystem && s.Messages[i-1].Pinned) {
					t.Errorf("leading system message %d is not pinned", i)
				}
			}
			// Reading is deterministic: same IDs, same everything.
			again, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s, again) {
				t.Error("two reads of the same file differ")
			}
			// Detection works on the head Read uses and on a short one.
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{detectSize, 4096} {
				if f, err := Detect(data[:min(n, len(data))]); err != nil || f != c.format {
					t.Errorf("Detect(first %d bytes) = %q, %v; want %q", n, f, err, c.format)
				}
			}
		})
	}
}

func TestCorpusClaudeCodeCompaction(t *testing.T) {
	s, err := ReadFile(corpusPath(t, "claude-code-swift-app.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	c := s.AgentCompactions[0]
	if !strings.HasPrefix(c.Summary, "This session is being continued from a previous conversation") || len(c.Summary) < 15000 || len(c.Summary) > 20000 {
		t.Errorf("summary: %d bytes starting %q", len(c.Summary), c.Summary[:min(60, len(c.Summary))])
	}
	if c.Trigger != "auto" || c.PreTokens != 173411 || c.ID != "27671858-fcfc-416c-86a1-3b04a6e1129c" {
		t.Errorf("compaction metadata: %+v", c)
	}
	for _, m := range s.Messages {
		if strings.Contains(textOf(m.Content, abi.BlockText), "This session is being continued") {
			t.Errorf("the agent's summary is in Messages (%s)", m.ID)
		}
	}
	// The call interrupted by the compaction gets its result before the
	// boundary; the first kept message is the agent resuming.
	before, kept := s.Messages[c.FirstKept-1], s.Messages[c.FirstKept]
	if before.Content[0].Type != abi.BlockToolResult || before.Content[0].Text != MissingResultText || !before.Content[0].IsError {
		t.Errorf("message before the boundary: %+v", before)
	}
	if kept.Role != abi.RoleAssistant || kept.ID != "0c4f2f2e-2d9f-4211-85a5-86de639ac423" {
		t.Errorf("first kept message: %s %s", kept.Role, kept.ID)
	}
}

func TestCorpusCodexCompactions(t *testing.T) {
	s, err := ReadFile(corpusPath(t, "codex-typescript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	prev := 0
	for i, c := range s.AgentCompactions {
		if c.FirstKept <= prev || c.FirstKept > len(s.Messages) {
			t.Errorf("compaction %d: FirstKept %d after %d of %d", i, c.FirstKept, prev, len(s.Messages))
		}
		prev = c.FirstKept
		if len(c.Replacement) == 0 || c.Replacement[0].Role != abi.RoleUser ||
			!strings.HasPrefix(c.Replacement[0].Content[0].Text, "create orphan dogfood branch") {
			t.Errorf("compaction %d: replacement history %+v", i, c.Replacement)
		}
		if err := Validate(c.Replacement); err != nil {
			t.Errorf("compaction %d: replacement: %v", i, err)
		}
	}
	if s.Skipped["compaction (encrypted)"] != 2 {
		t.Errorf("encrypted summaries skipped: %d, want 2", s.Skipped["compaction (encrypted)"])
	}
	// The system prompt comes from session_meta.
	if m := s.Messages[0]; m.Role != abi.RoleSystem || !m.Pinned || !strings.HasPrefix(m.Content[0].Text, "You are Codex") {
		t.Errorf("first message: %s pinned=%v", m.Role, m.Pinned)
	}
	// Usage: input excludes the cached part.
	m := s.Messages[5]
	if m.Usage == nil || *m.Usage != (abi.Usage{InputTokens: 19634 - 2432, CacheReadTokens: 2432, OutputTokens: 624}) {
		t.Errorf("usage of the first response: %+v", m.Usage)
	}
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
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.want {
			if s.Skipped[k] != v {
				t.Errorf("%s: Skipped[%q] = %d, want %d", c.file, k, s.Skipped[k], v)
			}
		}
	}
}

func BenchmarkRead(b *testing.B) {
	for _, c := range corpus {
		b.Run(c.file, func(b *testing.B) {
			data, err := os.ReadFile(corpusPath(b, c.file))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Read(bytes.NewReader(data), ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
