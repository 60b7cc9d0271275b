package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/compact-host/compact-host/host/formats"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inspectJSON runs inspect --json with args and decodes the report.
func inspectJSON(t *testing.T, args ...string) inspectReport {
	t.Helper()
	res := runCLI(t, runOpts{}, append([]string{"inspect", "--json"}, args...)...)
	require.Equal(t, 0, res.code, res.stderr)
	var r inspectReport
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &r), res.stdout)
	return r
}

// An agent's file is measured as the context the agent sends when it
// resumes: after its own compactions, not the history it no longer sends.
// The figures the agents recorded bound it: Codex's last usage in
// codex-typescript is 108,471 tokens, Claude Code's in claude-code-swift-app
// 93,531, each including the agent's overhead.
func TestInspectLiveContextOfAgentFiles(t *testing.T) {
	corpus := corpusDir(t)
	for _, tc := range []struct {
		file        string
		compactions int
		recorded    int
	}{
		{"codex-typescript.jsonl", 2, 108_471},
		{"claude-code-swift-app.jsonl", 1, 93_531},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(corpus, tc.file)
			live := inspectJSON(t, path)
			full := inspectJSON(t, "--full-history", path)
			assert.Equal(t, tc.compactions, live.Compactions)
			require.Len(t, live.FileCompactions, tc.compactions)
			for _, c := range live.FileCompactions {
				assert.Equal(t, "agent", c.By)
				assert.Positive(t, c.Line)
				assert.Positive(t, c.Bytes)
			}
			assert.True(t, full.FullHistory)
			assert.Equal(t, full.Tokens, live.HistoryTokens, "both readings agree on the full history")
			assert.Less(t, live.Tokens, full.Tokens)
			// The request the live context makes is within the agent's
			// own last figure, give or take the estimate (chars/4).
			assert.Less(t, live.Request, tc.recorded+tc.recorded/10)
			assert.Greater(t, live.Request, tc.recorded/2)
			assert.Greater(t, full.Tokens, tc.recorded, "the full history is more than the agent sends")
			assert.Equal(t, "file", live.AgentOverheadSource)
		})
	}
}

// Subagents' messages (agent_progress lines) are counted apart, not in the
// parent's context.
func TestInspectSubagentsApart(t *testing.T) {
	path := filepath.Join(corpusDir(t), "..", "corpus-new", "claude-code-subagents-pr-review.jsonl")
	if _, err := os.Stat(path); err != nil {
		t.Skip("no corpus-new")
	}
	r := inspectJSON(t, path)
	require.Len(t, r.Subagents, 3)
	seen := map[string]bool{}
	for _, sa := range r.Subagents {
		assert.NotEmpty(t, sa.ID)
		assert.NotEmpty(t, sa.ToolUseID)
		assert.Positive(t, sa.Messages)
		assert.Positive(t, sa.Tokens)
		seen[sa.ID] = true
	}
	assert.Len(t, seen, 3)
}

// --agent-overhead replaces the learned figure; a bad value names the
// flag and exits 2.
func TestAgentOverheadFlag(t *testing.T) {
	path := filepath.Join(corpusDir(t), "claude-code-swift-app.jsonl")
	r := inspectJSON(t, "--agent-overhead", "19k", path)
	assert.Equal(t, 19_000, r.AgentOverhead)
	assert.Equal(t, "flag", r.AgentOverheadSource)
	assert.Equal(t, r.Tokens+19_000, r.Request)
	res := runCLI(t, runOpts{}, "inspect", "--agent-overhead", "lots", path)
	assert.Equal(t, 2, res.code)
	assert.Contains(t, res.stderr, "--agent-overhead")
}

// compact --in-place budgets with the agent's overhead: the request the
// agent sends after it (the live context read back, plus the overhead)
// fits the budget; inspect then sees our compaction, and the live context.
func TestInPlaceBudgetsWithOverhead(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(corpusDir(t), "claude-code-go-cli.jsonl"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "s.jsonl")
	require.NoError(t, os.WriteFile(path, src, 0o644))
	res := runCLI(t, runOpts{}, "compact", "--strategy=structured", "--in-place", "--context-window", "32000", "--agent-overhead", "19k", path)
	require.Equal(t, 0, res.code, res.stderr)
	r := inspectJSON(t, "--context-window", "32000", "--agent-overhead", "19k", path)
	assert.LessOrEqual(t, r.Request, r.Budget, "the agent's request fits")
	require.Len(t, r.FileCompactions, 1)
	assert.Equal(t, "compact-host", r.FileCompactions[0].By)
	assert.Equal(t, 1, r.Compactions)
	assert.Less(t, r.Tokens, r.HistoryTokens)
}

// Undo needs nothing but the file: a copy elsewhere, or the file moved,
// has no record under the cache dir, and undo still restores it byte for
// byte. It refuses with exit 7 when the agent wrote after the compaction.
func TestUndoTravelsWithTheFile(t *testing.T) {
	for _, name := range []string{"claude-code-go-cli.jsonl", "codex-typescript.jsonl"} {
		t.Run(name, func(t *testing.T) {
			orig, err := os.ReadFile(filepath.Join(corpusDir(t), name))
			require.NoError(t, err)
			dir := t.TempDir()
			path := filepath.Join(dir, "s.jsonl")
			require.NoError(t, os.WriteFile(path, orig, 0o644))
			res := runCLI(t, runOpts{}, "compact", "--strategy=structured", "--in-place", "--context-window", "100000", path)
			require.Equal(t, 0, res.code, res.stderr)
			compacted, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Greater(t, len(compacted), len(orig))

			other := t.TempDir()
			cp := filepath.Join(other, "copy.jsonl")
			require.NoError(t, os.WriteFile(cp, compacted, 0o644))
			res = runCLI(t, runOpts{}, "undo", cp)
			require.Equal(t, 0, res.code, res.stderr)
			got, err := os.ReadFile(cp)
			require.NoError(t, err)
			assert.Equal(t, orig, got, "the copy is the original again, byte for byte")

			moved := filepath.Join(other, "moved.jsonl")
			require.NoError(t, os.Rename(path, moved))
			// The agent goes on from the compaction: undo would lose its line.
			f, err := os.OpenFile(moved, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString(`{"type":"agent-line","timestamp":"2030-01-01T00:00:00.000Z"}` + "\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
			before, err := os.ReadFile(moved)
			require.NoError(t, err)
			res = runCLI(t, runOpts{}, "undo", moved)
			assert.Equal(t, 7, res.code, res.stderr)
			after, err := os.ReadFile(moved)
			require.NoError(t, err)
			assert.Equal(t, before, after, "a refused undo changes nothing")
		})
	}
}

// Compacting a compacted file folds from its live context and appends
// only the new block: over ten in-place runs at a shrinking window the
// file stays readable, each run's live context is no larger than the one
// before, the file grows by exactly the block each run appends, and the
// bytes before it stay as they were. The last window, 28k, leaves room
// for codex-typescript's 11.4k of pinned instructions, the summary the
// emergency path keeps and the latest request. The later runs fall back
// to that path, which the test accepts (--allow-fallback).
func TestRepeatedInPlaceCompactionsFoldTheLiveContext(t *testing.T) {
	for _, name := range []string{"claude-code-go-cli.jsonl", "codex-typescript.jsonl"} {
		t.Run(name, func(t *testing.T) {
			orig, err := os.ReadFile(filepath.Join(corpusDir(t), name))
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "s.jsonl")
			require.NoError(t, os.WriteFile(path, orig, 0o644))
			prevLive := inspectJSON(t, "--agent-overhead", "0", path).Tokens
			prev := orig
			for run, window := 0, 64_000; run < 10; run, window = run+1, window-4_000 {
				res := runCLI(t, runOpts{}, "compact", "--strategy=structured", "--allow-fallback", "--in-place", "--agent-overhead", "0",
					"--context-window", strconv.Itoa(window), path)
				require.Equal(t, 0, res.code, "run %d: %s", run, res.stderr)
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				require.True(t, bytes.HasPrefix(data, prev), "run %d rewrote the bytes before its block", run)
				if len(data) > len(prev) {
					b, err := formats.FindAppended(data)
					require.NoError(t, err, "run %d", run)
					assert.Equal(t, int64(len(prev)), b.Offset, "run %d: the block names the bytes it was appended to", run)
					assert.Equal(t, int64(len(data)), b.End, "run %d: the file grew by its block alone", run)
				}
				s, err := formats.ReadFile(path)
				require.NoError(t, err, "run %d", run)
				require.NoError(t, formats.Validate(s.Live()), "run %d: the live context is a valid conversation", run)
				r := inspectJSON(t, "--agent-overhead", "0", path)
				assert.LessOrEqual(t, r.Tokens, prevLive, "run %d at %d: the live context grew", run, window)
				if len(data) > len(prev) {
					assert.Less(t, r.Tokens, prevLive, "run %d at %d appended a block that does not shrink what the agent sends", run, window)
				}
				prevLive, prev = r.Tokens, data
			}
			r := inspectJSON(t, "--agent-overhead", "0", path)
			t.Logf("%s: %d compactions in the file, live context %d tokens, full history %d", name, r.Compactions, r.Tokens, r.HistoryTokens)
			ours := 0
			for _, c := range r.FileCompactions {
				if c.By == "compact-host" {
					ours++
				}
			}
			assert.GreaterOrEqual(t, ours, 2, "the later runs compacted the compacted file")
		})
	}
}
