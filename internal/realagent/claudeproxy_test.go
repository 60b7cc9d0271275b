package realagent

import (
	"bytes"
	"context"
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// agentCompactSummary is the summary the scripted upstream writes when
// Claude Code asks for one; the agent keeps what is inside <summary>.
const agentCompactSummary = "AGENT-SUMMARY-9e2b: the user works on a Go command-line tool."

// compactAnswer answers Claude Code's summary request as a model does:
// its analysis, then the summary.
func compactAnswer(int, []byte) []block {
	return []block{{Type: "text", Text: "<analysis>\nThe conversation was read.\n</analysis>\n\n<summary>\n" + agentCompactSummary + "\n</summary>"}}
}

// compactSummaryLine is the text of the agent's isCompactSummary record
// in its session file, "" when it has none.
func compactSummaryLine(t *testing.T, path string) string {
	t.Helper()
	text := ""
	for _, r := range records(t, path) {
		if r["isCompactSummary"] != true {
			continue
		}
		msg := obj(r["message"])
		text = str(msg["content"])
		for _, b := range list(msg["content"]) {
			text += str(obj(b)["text"])
		}
	}
	return text
}

// TestClaudeCodeCompactThroughProxy runs Claude Code's own /compact
// (claude -p --resume <id> /compact) on a corpus session through the
// proxy. At a window its summary request fits, the request reaches the
// upstream byte for byte; at one it overflows, the proxy folds it with
// its own summary, never by the emergency path. Either way the summary
// the upstream wrote is what the agent keeps as its isCompactSummary line.
func TestClaudeCodeCompactThroughProxy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int
		folded bool
	}{
		{"fits", 1_000_000, false},
		{"overflows", 48_000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := agentBin(t, ClaudeCode)
			src := corpusPath(t, "claude-code-go-cli.jsonl")
			up := newScriptedAnthropic(t, compactAnswer)
			rig := startProxy(t, up.srv.URL, host.Config{ContextWindow: tc.window})
			run, err := Resume(context.Background(), ClaudeCode, Options{Bin: bin, Session: src, Prompt: "/compact", Dir: t.TempDir(), BaseURL: rig.url})
			require.NoError(t, err)
			logOtherRequests(t, run)

			sent := rig.sentCalls()
			got, sums := up.calls()
			require.Len(t, sent, 1, "one model call: the summary request")
			require.Len(t, got, 1)
			assert.Contains(t, rig.logs.String(), `"agent_summary":"claude-code"`, "the proxy knew the request for the agent's own summary request")
			msgs := messagesOf(t, sent[0])
			t.Logf("summary request: %d messages, %d bytes; upstream got %d bytes", len(msgs), len(sent[0]), len(got[0]))
			if !tc.folded {
				assert.Equal(t, 1.0, rig.metric(t, `compact_host_proxy_requests_total{action="agent_summary"`))
				assert.Equal(t, string(sent[0]), string(got[0]), "the summary request reached the upstream byte for byte")
				assert.Empty(t, sums, "no summary of ours was made")
			} else {
				require.NotEqual(t, string(sent[0]), string(got[0]), "the request past the window was folded")
				assert.Less(t, len(got[0]), len(sent[0]))
				first := string(messagesOf(t, got[0])[0])
				assert.Contains(t, first, "[Context compacted: the summary below", "folded by our summary")
				assert.NotEmpty(t, sums, "our strategy asked the upstream for the summary")
				assert.Equal(t, 0.0, rig.metric(t, `compact_host_proxy_compactions_total{strategy="emergency"`))
				assert.Equal(t, 1.0, rig.metric(t, `compact_host_proxy_compactions_total`))
				// The agent's instruction, the request's last message, is kept.
				gm := messagesOf(t, got[0])
				assert.Equal(t, string(msgs[len(msgs)-1]), string(gm[len(gm)-1]))
			}
			assert.Contains(t, compactSummaryLine(t, sessionFile(t, run)), agentCompactSummary,
				"the upstream's summary is the agent's isCompactSummary line")
			assert.False(t, bytes.Contains(run.Stderr, []byte("Error")), "%s", run.Stderr)
		})
	}
}
