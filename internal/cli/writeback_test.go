package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// agentCorpus are the corpus sessions whose agents take a compaction back.
var agentCorpus = []string{"claude-code-go-cli.jsonl", "claude-code-swift-app.jsonl", "codex-typescript.jsonl"}

// copyCorpus copies a corpus file (read-only) into the test's directory.
func copyCorpus(t *testing.T, name string) (path string, data []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(corpusDir(t), name))
	require.NoError(t, err)
	path = filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path, data
}

// modelView is what the model sees of msgs: roles, summary flags and
// content, without the IDs and usage figures a copy cannot keep.
func modelView(msgs []abi.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		c, _ := json.Marshal(m.Content)
		out[i] = fmt.Sprintf("%s summary=%v %s", m.Role, m.Summary, c)
	}
	return out
}

// compactedView is what the session read from orig looks like after the
// compaction the report describes: the pinned system messages, a summary
// carrying the compaction's summary, and every message after the folded
// ones.
func compactedView(t *testing.T, orig *formats.Session, rep compactReport) (pinned, kept []abi.Message) {
	t.Helper()
	require.NotNil(t, rep.Compaction)
	folded := slices.IndexFunc(orig.Messages, func(m abi.Message) bool { return m.ID == rep.Compaction.FoldedThrough })
	require.GreaterOrEqual(t, folded, 0, "the compaction folds through a message of the file")
	for _, m := range orig.Messages[:folded+1] {
		if m.Pinned && m.Role == abi.RoleSystem {
			pinned = append(pinned, m)
		}
	}
	return pinned, orig.Messages[folded+1:]
}

// Round trip: each corpus Claude Code and Codex session compacted in
// place reads back as the summary and exactly the kept messages, and undo
// gives back the file byte for byte.
func TestCompactInPlaceAgentSessions(t *testing.T) {
	for _, name := range agentCorpus {
		t.Run(name, func(t *testing.T) {
			path, orig := copyCorpus(t, name)
			before, err := formats.Read(bytes.NewReader(orig), "")
			require.NoError(t, err)

			r := runCLI(t, runOpts{}, "compact", "--strategy=structured", "--context-window", "64000", "--in-place", "--json", path)
			require.Equal(t, ExitOK, r.code, "%s%s", r.stdout, r.stderr)
			var rep compactReport
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
			require.Equal(t, "compacted", rep.Action, "one compaction, no emergency after it")
			assert.Equal(t, path, rep.Output)
			assert.Equal(t, before.Format, rep.OutputFormat)

			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(data, orig), "the original lines stay as they were")
			after, err := formats.Read(bytes.NewReader(data), "")
			require.NoError(t, err)
			assert.Equal(t, modelView(before.Messages), modelView(after.Messages), "the history reads as before")

			pinned, kept := compactedView(t, before, rep)
			got := after.Compacted()
			require.Len(t, got, len(pinned)+1+len(kept))
			assert.Equal(t, modelView(pinned), modelView(got[:len(pinned)]))
			sum := got[len(pinned)]
			assert.True(t, sum.Summary)
			require.Len(t, sum.Content, 1)
			assert.Contains(t, sum.Content[0].Text, rep.Compaction.Summary)
			assert.Equal(t, modelView(kept), modelView(got[len(pinned)+1:]), "exactly the kept messages")
			assert.Equal(t, rep.Kept, len(got), "the context the report counts")

			r = runCLI(t, runOpts{}, "undo", path)
			require.Equal(t, ExitOK, r.code, "%s%s", r.stdout, r.stderr)
			assert.Contains(t, r.stdout, "undid the compaction written into "+path)
			data, err = os.ReadFile(path)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(orig, data), "undo restores the file byte for byte")

			r = runCLI(t, runOpts{}, "undo", path)
			assert.Equal(t, ExitInput, r.code)
			assert.Contains(t, r.stderr, "no record of a compaction")
		})
	}
}

// -o writes the original lines and the compaction to a new file; the
// input is untouched, and undo on the copy takes exactly the compaction
// away.
func TestCompactAgentSessionToFile(t *testing.T) {
	for name, format := range map[string]string{"claude-code-swift-app.jsonl": formats.ClaudeCode, "codex-typescript.jsonl": formats.Codex} {
		t.Run(name, func(t *testing.T) {
			path, orig := copyCorpus(t, name)
			out := filepath.Join(t.TempDir(), "out.jsonl")
			r := runCLI(t, runOpts{}, "compact", "--strategy=structured", "--context-window", "64000", "-o", out, path)
			require.Equal(t, ExitOK, r.code, "%s%s", r.stdout, r.stderr)
			assert.Contains(t, r.stdout, "wrote "+out+" ("+format+")")
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(orig, data), "the input is untouched")
			written, err := os.ReadFile(out)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(written, orig))
			assert.Greater(t, len(written), len(orig))
			s, err := formats.ReadFile(out)
			require.NoError(t, err)
			assert.True(t, slices.ContainsFunc(s.Compacted(), func(m abi.Message) bool { return m.Summary }))

			r = runCLI(t, runOpts{}, "undo", "--json", out)
			require.Equal(t, ExitOK, r.code, "%s%s", r.stdout, r.stderr)
			var u map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &u))
			assert.EqualValues(t, len(orig), u["size"])
			assert.EqualValues(t, len(written)-len(orig), u["bytes_removed"])
			written, err = os.ReadFile(out)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(orig, written))
		})
	}
}

// A file the agent wrote to after the compaction is not undone: that
// would lose its lines.
func TestUndoRefusesAfterTheAgentWentOn(t *testing.T) {
	path, _ := copyCorpus(t, "claude-code-swift-app.jsonl")
	r := runCLI(t, runOpts{}, "compact", "--strategy=structured", "--context-window", "64000", "--in-place", path)
	require.Equal(t, ExitOK, r.code, "%s%s", r.stdout, r.stderr)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"type":"queue-operation","operation":"enqueue","timestamp":"2031-01-01T00:00:00.000Z","sessionId":"x"}` + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	now, err := os.ReadFile(path)
	require.NoError(t, err)

	r = runCLI(t, runOpts{}, "undo", path)
	assert.Equal(t, ExitBusy, r.code, "%s%s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, path)
	assert.Contains(t, r.stderr, "written after the compaction")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(now, after), "nothing was changed")
}

// A session whose last line an agent is still writing is refused with
// exit 7 and a message naming the file; nothing is appended.
func TestCompactInPlaceRefusesATornSession(t *testing.T) {
	_, orig := copyCorpus(t, "claude-code-swift-app.jsonl")
	torn := append(append([]byte(nil), orig...), []byte(`{"parentUuid":"x","type":"assistant","message":{"id":"msg_1","content":[{"type":"te`)...)
	path := filepath.Join(t.TempDir(), "torn.jsonl")
	require.NoError(t, os.WriteFile(path, torn, 0o644))
	r := runCLI(t, runOpts{}, "compact", "--strategy=structured", "--context-window", "64000", "--in-place", path)
	assert.Equal(t, ExitBusy, r.code, "%s%s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, path+": the log changed on disk: its last line is not complete yet")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(torn, data), "nothing was appended")
}

// --in-place on a format no agent takes back is a usage error.
func TestCompactInPlaceOtherFormats(t *testing.T) {
	path, _ := copyCorpus(t, "copilot-cli.jsonl")
	r := runCLI(t, runOpts{}, "compact", "--context-window", "64000", "--in-place", path)
	assert.Equal(t, ExitUsage, r.code, "%s%s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, "a Claude Code session or a Codex rollout")
}

// When the gate shortens kept tool results after the compaction, the
// written-back file carries them shortened: the agent is sent the context
// the report counts, and the original lines keep the full text.
func TestCompactInPlaceWritesShortenedResults(t *testing.T) {
	path, orig := copyCorpus(t, "codex-typescript.jsonl")
	before, err := formats.Read(bytes.NewReader(orig), "")
	require.NoError(t, err)
	r := runCLI(t, runOpts{}, "compact", "--strategy=structured", "--context-window", "32000", "--in-place", "--json", path)
	require.Equal(t, ExitOK, r.code, "%s%s", r.stdout, r.stderr)
	var rep compactReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	after, err := formats.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, modelView(before.Messages), modelView(after.Messages), "the original lines keep the full text")
	pinned, kept := compactedView(t, before, rep)
	got := after.Compacted()
	require.Len(t, got, len(pinned)+1+len(kept), "instructions, summary and the kept messages")
	assert.Equal(t, modelView(pinned), modelView(got[:len(pinned)]))
	shortened := 0
	for i, m := range got[len(got)-len(kept):] {
		require.Equal(t, kept[i].Role, m.Role)
		require.Len(t, m.Content, len(kept[i].Content))
		for j, b := range m.Content {
			if b.Text != kept[i].Content[j].Text {
				assert.Equal(t, abi.BlockToolResult, b.Type, "only tool results are shortened")
				assert.Less(t, len(b.Text), len(kept[i].Content[j].Text))
				shortened++
			}
		}
	}
	assert.Positive(t, shortened, "the gate shortened kept results at this window")
}
