package eval

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// textTrajectory reads testdata/mini-swe-agent-v1-text-actions.traj.json:
// a mini-swe-agent trajectory of the first format (actions in the
// assistant's text, outputs as user messages), written for these tests: a
// task, then fifteen commands with long outputs.
func textTrajectory(t *testing.T) *formats.Session {
	t.Helper()
	s, err := formats.ReadFile(filepath.Join("testdata", "mini-swe-agent-v1-text-actions.traj.json"))
	require.NoError(t, err)
	require.Equal(t, formats.MiniSWEAgent, s.Format)
	return s
}

func TestLatestRequestOfTextActions(t *testing.T) {
	s := textTrajectory(t)
	require.True(t, textActions(s))
	req, ok := latestRequest(s.Messages, true)
	require.True(t, ok)
	assert.Contains(t, req, "drops the currency symbol for negative totals", "the task, not a command's output")

	proxy, _ := LatestRequest(s.Messages)
	assert.True(t, strings.HasPrefix(proxy, "<returncode>"), "read without its format, the last output reads as the request")

	// A trajectory with tool calls keeps the engine's notion.
	withTools := &formats.Session{Format: formats.MiniSWEAgent, Messages: workSession(1)}
	assert.False(t, textActions(withTools))
	assert.False(t, textActions(&formats.Session{Format: formats.ClaudeCode, Messages: s.Messages}))
}

// quoting summarizes by quoting the first request it folds as a Markdown
// block, as the structured strategy quotes the active task.
var quoting = host.StrategyFunc(func(_ context.Context, _ plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%d messages happened.\n\n## Active Task\n", len(req.Messages))
	for _, m := range req.Messages {
		if m.Role == abi.RoleUser && len(m.Content) > 0 && strings.HasPrefix(m.Content[0].Text, "<pr_description>") {
			for _, line := range strings.Split(m.Content[0].Text, "\n") {
				b.WriteString("> " + line + "\n")
			}
		}
	}
	if req.PreviousSummary != "" {
		b.WriteString(req.PreviousSummary)
	}
	return &abi.SummarizeResponse{Summary: b.String(), Offline: true}, nil
})

// TestReplayRequestKeptOfTextActions: in a text-action trajectory the
// request the replay checks is the task, not a command's output. A summary
// that forgets it still keeps it: the host's check reads past the output
// sent as user messages (abi.IsObservation) and adds the task. One that
// quotes it as a Markdown block keeps it itself.
func TestReplayRequestKeptOfTextActions(t *testing.T) {
	s := textTrajectory(t)
	r := replay(ctx, replayConfig{session: s, name: "text", window: 8000, strategy: "forgetful", impl: forgetful})
	require.Empty(t, r.Err)
	require.NotEmpty(t, r.Compactions)
	require.Positive(t, r.RequestsFolded)
	assert.Equal(t, r.RequestsFolded, r.RequestsRetained, "the host's check did not add the forgotten task")

	r = replay(ctx, replayConfig{session: s, name: "text", window: 8000, strategy: "quoting", impl: quoting})
	require.Empty(t, r.Err)
	require.Positive(t, r.RequestsFolded)
	assert.Equal(t, r.RequestsFolded, r.RequestsRetained, "the task quoted in the summary is kept")
}

func TestRetainedQuoted(t *testing.T) {
	req := "Fix the exporter.\nNegative totals lose their symbol."
	assert.True(t, Retained(req, "## Active Task\n> Fix the exporter.\n> Negative totals lose\n> their symbol.\n"))
	assert.True(t, Retained(req, "Fix the   exporter. Negative totals lose their symbol."))
	assert.False(t, Retained(req, "> Fix the exporter.\n"))
	assert.False(t, Retained("", "anything"), "an empty request is never kept")
}

func TestLatestRequestSkipsHarnessText(t *testing.T) {
	msgs := []abi.Message{
		{Role: abi.RoleUser, Content: []abi.Block{
			{Type: abi.BlockText, Text: "# AGENTS.md instructions for /repo\n<INSTRUCTIONS>be careful</INSTRUCTIONS>"},
			{Type: abi.BlockText, Text: "<environment_context><cwd>/repo</cwd></environment_context>"}}},
		userText("<current_datetime>2026-06-24T01:33:53+02:00</current_datetime> Fix the exporter.\n<system_reminder>tables: todos</system_reminder>"),
		{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "On it."}}},
		userText("<turn_aborted> The user interrupted the previous turn on purpose. </turn_aborted>"),
		userText("<task-notification> <task-id>a0</task-id> <status>completed</status> </task-notification>"),
		userText("Base directory for this skill: /home/u/.claude/skills/review\n# Review\nSteps..."),
	}
	req, ok := LatestRequest(msgs)
	require.True(t, ok)
	assert.Equal(t, "Fix the exporter.", req, "the user's words, without the harness's timestamp and reminder")

	_, ok = LatestRequest(msgs[:1])
	assert.False(t, ok, "AGENTS.md and the environment context are not a request")
	assert.True(t, Retained(req, "## Active Task\n> Fix the exporter.\n"), "a summary without the timestamp keeps it")
}
