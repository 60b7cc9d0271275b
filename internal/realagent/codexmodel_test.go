package realagent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCodexResumeWithAnotherModelCompactsFirst resumes the Codex rollout
// with a model other than the one it recorded: Codex then compacts before
// the turn (a Responses call whose input ends with a compaction_trigger
// item, answered with one compaction item), and the turn carries that item
// in place of the history; the rollout records the compaction.
func TestCodexResumeWithAnotherModelCompactsFirst(t *testing.T) {
	bin := agentBin(t, Codex)
	src := corpusPath(t, "codex-typescript.jsonl")
	f := codexFacts(t, src)
	run, err := Resume(context.Background(), Codex, Options{Bin: bin, Session: src, Prompt: resumePrompt, Reply: resumeReply,
		Model: "gpt-6.1-sol", Dir: t.TempDir()})
	require.NoError(t, err)
	calls := run.ModelCalls()
	require.Len(t, calls, 2, "a compaction, then the turn: %s", describe(run.Requests))

	type item struct {
		Type      string `json:"type"`
		Encrypted string `json:"encrypted_content"`
	}
	var compaction struct {
		Input []item `json:"input"`
	}
	require.NoError(t, json.Unmarshal(calls[0].Body, &compaction))
	require.NotEmpty(t, compaction.Input)
	assert.Equal(t, "compaction_trigger", compaction.Input[len(compaction.Input)-1].Type)
	asked := jsonStrings(t, calls[0].Body)
	for _, id := range f.Kept {
		assert.True(t, asked[id], "tool call %s is not in what Codex asked to compact", id)
	}

	turn := jsonStrings(t, calls[1].Body)
	assert.True(t, containsText(turn, resumePrompt))
	assert.True(t, containsText(turn, f.LastUser), "the user's messages survive Codex's compaction")
	assert.True(t, turn[CompactionContent], "the turn lacks the compaction item the upstream answered")
	for _, id := range f.Kept {
		assert.False(t, turn[id], "tool call %s is in the turn after Codex compacted it away", id)
	}

	files, err := filepath.Glob(filepath.Join(run.Home, ".codex", "sessions", "*", "*", "*", "rollout-*-"+run.SessionID+".jsonl"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	last := compactedRecords(t, files[0])
	require.Len(t, last, 3, "the file's two compactions and the new one")
	var repl struct {
		Replacement []item `json:"replacement_history"`
	}
	require.NoError(t, json.Unmarshal(last[2], &repl))
	assert.Contains(t, repl.Replacement, item{Type: "compaction", Encrypted: CompactionContent})
}

// compactedRecords returns the payloads of a rollout's compacted records.
func compactedRecords(t *testing.T, path string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	eachRecord(data, func(line []byte) bool {
		var r struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(line, &r) == nil && r.Type == "compacted" {
			out = append(out, r.Payload)
		}
		return true
	})
	return out
}
