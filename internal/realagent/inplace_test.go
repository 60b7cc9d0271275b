package realagent

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/internal/cli"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// summaryMarker begins every summary compact-host writes, telling the
// model what it stands for.
const summaryMarker = "[Context compacted: the summary below stands for"

// TestResumeAfterCompactInPlace compacts a copy of each corpus file with
// `compact-host compact --in-place` (offline, no provider) and resumes it
// with the real agent: the agent sends compact-host's summary and the kept
// tail, and none of the tool calls the summary folded.
func TestResumeAfterCompactInPlace(t *testing.T) {
	for _, tc := range corpusResumes {
		t.Run(tc.file, func(t *testing.T) {
			bin := agentBin(t, tc.agent)
			data, err := os.ReadFile(corpusPath(t, tc.file))
			require.NoError(t, err)
			src := filepath.Join(t.TempDir(), tc.file)
			require.NoError(t, os.WriteFile(src, data, 0o600))
			compactInPlace(t, src)

			facts := claudeCodeFacts
			if tc.agent == Codex {
				facts = codexFacts
			}
			f := facts(t, src)
			require.NotEmpty(t, f.Folded, "compact-host folded no tool call")
			require.NotEmpty(t, f.Kept, "compact-host kept no tool call")

			run, err := Resume(context.Background(), tc.agent, Options{Bin: bin, Session: src, Prompt: resumePrompt, Reply: resumeReply, Dir: t.TempDir()})
			require.NoError(t, err)
			calls := run.ModelCalls()
			require.Len(t, calls, 1, "%s", describe(run.Requests))
			sent := jsonStrings(t, calls[0].Body)
			require.True(t, strings.HasPrefix(f.Summary, summaryMarker), "the file's last summary is not compact-host's: %.80q", f.Summary)
			assert.True(t, containsText(sent, f.Summary), "the agent did not send compact-host's summary")
			assert.True(t, containsText(sent, resumePrompt))
			for _, id := range f.Kept {
				assert.True(t, sent[id], "tool call %s, kept by compact-host, is not in the request", id)
			}
			for _, id := range f.Folded {
				assert.False(t, containsText(sent, id), "tool call %s, folded by compact-host, is in the request", id)
			}
			e, err := InspectEngine()
			require.NoError(t, err)
			counted, err := CountSent(e, tc.agent, calls[0].Body)
			require.NoError(t, err)
			t.Logf("after compact --in-place: inspect %d, sent %d (messages %d, system %d, tools %d)", inspectTokens(t, src), counted.Total(), counted.Conversation, counted.System, counted.Tools)
			// Compacted for a 48k window with the agent's overhead in the
			// budget, the agent's whole request (system and tools
			// included) fits that window, counted as compact-host counts.
			assert.LessOrEqual(t, counted.Total(), inPlaceWindow, "the agent's request after compacting for a %d-token window", inPlaceWindow)
		})
	}
}

// inPlaceWindow is the window compactInPlace compacts for.
const inPlaceWindow = 48_000

// compactInPlace runs `compact-host compact --in-place` on path with no
// provider, so the strategy runs offline. The live context of these files
// fits the default window, so a 48k window (less Claude Code's measured
// 19k of system prompt and tools) makes each fold.
func compactInPlace(t *testing.T, path string) {
	t.Helper()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	env := map[string]string{"XDG_CONFIG_HOME": dir, "COMPACT_HOST_PLUGINS_DIR": filepath.Join(dir, "plugins")}
	code := cli.Run(context.Background(), []string{"compact", "--provider", "none", "--in-place", "--context-window", strconv.Itoa(inPlaceWindow), "--agent-overhead", "19k", "--json", path},
		cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }})
	require.Equal(t, 0, code, "compact-host compact --in-place %s: %s", path, errOut.String())
	var r map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &r), "%s", out.String())
}
