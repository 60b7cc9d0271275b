package realagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	// "--model default" asks for Claude Code's default model, as no
	// --model does: its requests put system messages inside "messages",
	// one of them after the summary instruction.
	for _, tc := range []struct {
		name   string
		window int
		folded bool
		model  string
	}{
		{"fits", 1_000_000, false, ""},
		{"overflows", 48_000, true, ""},
		{"default model fits", 1_000_000, false, "default"},
		{"default model overflows", 48_000, true, "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := agentBin(t, ClaudeCode)
			src := corpusPath(t, "claude-code-go-cli.jsonl")
			up := newScriptedAnthropic(t, compactAnswer)
			rig := startProxy(t, up.srv.URL, host.Config{ContextWindow: tc.window})
			run, err := Resume(context.Background(), ClaudeCode, Options{Bin: bin, Session: src, Prompt: "/compact", Model: tc.model, Dir: t.TempDir(), BaseURL: rig.url})
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
				// The summary comes first, after any system message it folded.
				first := ""
				for _, m := range messagesOf(t, got[0]) {
					if !bytes.HasPrefix(m, []byte(`{"role":"system"`)) {
						first = string(m)
						break
					}
				}
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

// conversationCalls is how many model calls the scripted conversation
// makes: a Read of one file each, then the closing answer.
const conversationCalls = 13

// noteFile is the name of the file the scripted agent reads at call n.
func noteFile(n int) string { return fmt.Sprintf("notes_%02d.txt", n) }

// writeNotes writes the files the scripted conversation reads into the
// agent's working directory: 6,000 bytes each, about 1,500 tokens.
func writeNotes(t *testing.T, work string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(work, 0o700))
	for n := range conversationCalls {
		var b strings.Builder
		for i := 0; b.Len() < 6000; i++ {
			fmt.Fprintf(&b, "note %d.%d: the parser keeps offset %d for line %d of the scripted file.\n", n, i, i*37, i)
		}
		require.NoError(t, os.WriteFile(filepath.Join(work, noteFile(n)), []byte(b.String()), 0o600))
	}
}

// thinkingSignature is the signature of the thinking block of call n's
// answer.
func thinkingSignature(n int) string {
	return fmt.Sprintf("EqQBCkgIBxABGAIiQL+realagent/sig-%02d==", n)
}

// readNotesScript has the agent read one file per call, each answer
// opening with a signed thinking block, and answer at the last call.
func readNotesScript(work string) func(n int, body []byte) []block {
	return func(n int, body []byte) []block {
		thinking := block{Type: "thinking", Thinking: fmt.Sprintf("Call %d: read the next file.", n), Signature: thinkingSignature(n)}
		if n >= conversationCalls-1 {
			return []block{thinking, {Type: "text", Text: "CONVERSATION-DONE: every file was read."}}
		}
		input, _ := json.Marshal(map[string]string{"file_path": filepath.Join(work, noteFile(n))})
		return []block{thinking, {Type: "tool_use", ID: fmt.Sprintf("toolu_realagent%02d", n), Name: "Read", Input: input}}
	}
}

// seedSession is a Claude Code session of one exchange, the start the
// scripted conversation resumes.
const seedSession = `{"type":"user","sessionId":"5f0c2d1e-8a4b-4c3d-9e2f-1a0b9c8d7e6f","message":{"role":"user","content":"We will read the notes in this directory."},"uuid":"6a1b2c3d-0000-4000-8000-000000000001","cwd":"/tmp","timestamp":"2026-11-28T10:00:00.000Z"}
{"type":"assistant","sessionId":"5f0c2d1e-8a4b-4c3d-9e2f-1a0b9c8d7e6f","parentUuid":"6a1b2c3d-0000-4000-8000-000000000001","message":{"role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"Ready."}]},"uuid":"6a1b2c3d-0000-4000-8000-000000000002","timestamp":"2026-11-28T10:00:01.000Z"}
`

// TestClaudeCodeConversationThroughProxy runs a 13-call conversation of
// the real Claude Code through the proxy at a small window: it is compacted
// once, and every later call carries the same replacement bytes, the kept
// messages byte for byte, thinking signatures unchanged. With no --model,
// Claude Code asks for its default model and puts system messages inside
// "messages"; the proxy reads them as pinned system messages and keeps
// them where they were.
func TestClaudeCodeConversationThroughProxy(t *testing.T) {
	// Each window puts the compaction point (75% of the window less the
	// 8k reply) about eight calls in: the agent's system prompt and tools
	// are about 22k tokens with --model claude-sonnet-4-5 and 13k with
	// the default model, which defers most tool schemas.
	for _, tc := range []struct {
		name, model string
		window      int
	}{
		{"sonnet", "claude-sonnet-4-5", 55_000},
		{"default model", "", 40_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := agentBin(t, ClaudeCode)
			dir, err := filepath.EvalSymlinks(t.TempDir())
			require.NoError(t, err)
			work := filepath.Join(dir, "work")
			writeNotes(t, work)
			up := newScriptedAnthropic(t, readNotesScript(work))
			rig := startProxy(t, up.srv.URL, host.Config{ContextWindow: tc.window, MaxOutputTokens: 8_000, KeepRecentTokens: 3_000})
			run, err := Resume(context.Background(), ClaudeCode, Options{Bin: bin, Session: writeFile(t, "seed.jsonl", seedSession),
				Prompt: "Read each notes file in turn.", Model: tc.model, Dir: dir, BaseURL: rig.url, Timeout: 3 * time.Minute})
			require.NoError(t, err)
			logOtherRequests(t, run)
			assert.Contains(t, string(run.Stdout), "CONVERSATION-DONE")

			sent := rig.sentCalls()
			got, sums := up.calls()
			require.Len(t, sent, conversationCalls, "the agent's model calls")
			require.Len(t, got, conversationCalls)
			var model struct {
				Model string `json:"model"`
			}
			require.NoError(t, json.Unmarshal(sent[0], &model))
			systemInMessages := 0
			for _, m := range messagesOf(t, sent[len(sent)-1]) {
				if bytes.HasPrefix(m, []byte(`{"role":"system"`)) {
					systemInMessages++
				}
			}
			t.Logf("model %s; %d system messages inside messages", model.Model, systemInMessages)
			if tc.model == "" {
				require.Positive(t, systemInMessages, "the default model's requests carry system messages inside messages")
			}
			checkCompactedOnce(t, rig, sent, got, true)
			assert.NotEmpty(t, sums, "the proxy's strategy asked for its summary")
			if tc.model == "" {
				// The system messages the agent sent are where it put them:
				// the kept ones byte for byte, the folded ones in the replacement.
				last := messagesOf(t, got[len(got)-1])
				n := 0
				for _, m := range last {
					if bytes.HasPrefix(m, []byte(`{"role":"system"`)) {
						n++
					}
				}
				assert.Equal(t, systemInMessages, n, "every system message the agent sent inside messages is still there")
			}
		})
	}
}

// checkCompactedOnce checks a conversation's calls as sent and as the
// upstream got them: the same until one call is compacted; from it on,
// every call carries the same replacement in place of the same folded
// prefix, then the agent's kept messages byte for byte; everything but
// "messages" unchanged; every thinking signature of a kept message as
// the agent sent it, and, with signatures, the signature of every
// answer after the compaction in the last call.
func checkCompactedOnce(t *testing.T, rig *proxyRig, sent, got [][]byte, signatures bool) {
	t.Helper()
	at := -1
	var repl []json.RawMessage
	for i := range sent {
		if bytes.Equal(sent[i], got[i]) {
			require.Equal(t, -1, at, "call %d went uncompacted after call %d was compacted", i, at)
			continue
		}
		var s, g map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(sent[i], &s))
		require.NoError(t, json.Unmarshal(got[i], &g))
		require.Equal(t, len(s), len(g), "call %d: top-level fields", i)
		for k := range s {
			if k != "messages" {
				assert.Equal(t, string(s[k]), string(g[k]), "call %d: %s changed", i, k)
			}
		}
		sm, gm := messagesOf(t, sent[i]), messagesOf(t, got[i])
		kept := 0
		for kept < len(gm) && kept < len(sm) && string(gm[len(gm)-1-kept]) == string(sm[len(sm)-1-kept]) {
			kept++
		}
		require.Positive(t, kept, "call %d", i)
		r := gm[:len(gm)-kept]
		require.NotEmpty(t, r, "call %d", i)
		if at < 0 {
			at, repl = i, r
			t.Logf("compacted at call %d: %d messages, %d bytes, went as %d messages, %d bytes", i, len(sm), len(sent[i]), len(gm), len(got[i]))
		} else {
			require.Len(t, r, len(repl), "call %d: the replacement", i)
			for k := range repl {
				assert.Equal(t, string(repl[k]), string(r[k]), "call %d: replacement message %d differs", i, k)
			}
		}
		// The folded prefix is the same one: what the agent sent before
		// the kept tail grows only by what came after the compaction.
		for _, m := range gm[len(gm)-kept:] {
			var msg struct {
				Content []struct {
					Type      string `json:"type"`
					Signature string `json:"signature"`
				} `json:"content"`
			}
			if json.Unmarshal(m, &msg) != nil {
				continue
			}
			for _, b := range msg.Content {
				if b.Type == "thinking" {
					assert.Contains(t, b.Signature, "realagent/sig-", "call %d: a kept thinking block lost its signature", i)
				}
			}
		}
	}
	require.GreaterOrEqual(t, at, 0, "the conversation was never compacted")
	assert.Less(t, at, len(sent)-2, "too few calls after the compaction to show it is reused")
	assert.Equal(t, 1.0, rig.metric(t, "compact_host_proxy_compactions_total"), "compacted once")
	assert.Equal(t, 0.0, rig.metric(t, `compact_host_proxy_compactions_total{strategy="emergency"`))
	if !signatures {
		return
	}
	// The signatures of the answers after the compaction arrive as the
	// upstream gave them.
	lastGot := string(got[len(got)-1])
	for n := at; n < len(sent)-1; n++ {
		assert.Contains(t, lastGot, thinkingSignature(n), "the signature of call %d's answer", n)
	}
}

// autoCompactPrompt is the prompt of the auto-compact run.
const autoCompactPrompt = "realagent auto-compact check: answer with one word."

// TestClaudeCodeAutoCompactThroughProxy resumes a corpus session whose
// context is past Claude Code's auto-compact point (lowered to 30% of the
// window with CLAUDE_AUTOCOMPACT_PCT_OVERRIDE): Claude Code compacts it
// on its own before the turn. Its summary request goes through the proxy
// whole, and the turn after it starts from the upstream's summary.
func TestClaudeCodeAutoCompactThroughProxy(t *testing.T) {
	bin := agentBin(t, ClaudeCode)
	src := corpusPath(t, "claude-code-go-cli.jsonl")
	up := newScriptedAnthropic(t, func(n int, body []byte) []block {
		if bytes.Contains(body, []byte("<analysis>")) && bytes.Contains(body, []byte("summary of the conversation")) {
			return compactAnswer(n, body)
		}
		return []block{{Type: "text", Text: "AUTO-COMPACT-DONE"}}
	})
	rig := startProxy(t, up.srv.URL, host.Config{ContextWindow: 1_000_000})
	run, err := Resume(context.Background(), ClaudeCode, Options{Bin: bin, Session: src, Prompt: autoCompactPrompt, Dir: t.TempDir(),
		BaseURL: rig.url, Env: []string{"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=30"}})
	require.NoError(t, err)
	logOtherRequests(t, run)
	assert.Contains(t, string(run.Stdout), "AUTO-COMPACT-DONE")

	sent := rig.sentCalls()
	got, sums := up.calls()
	require.Len(t, sent, 2, "the agent's summary request, then the turn")
	require.Len(t, got, 2)
	assert.Equal(t, string(sent[0]), string(got[0]), "the auto-compact summary request reached the upstream byte for byte")
	assert.Equal(t, 1.0, rig.metric(t, `compact_host_proxy_requests_total{action="agent_summary"`))
	assert.Empty(t, sums, "the proxy made no summary of its own")
	t.Logf("auto-compact: summary request %d messages, %d bytes; the turn after it %d messages, %d bytes",
		len(messagesOf(t, sent[0])), len(sent[0]), len(messagesOf(t, sent[1])), len(sent[1]))
	assert.Contains(t, string(got[1]), agentCompactSummary, "the turn starts from the upstream's summary")
	assert.Contains(t, string(got[1]), autoCompactPrompt)
	assert.Less(t, len(sent[1]), len(sent[0])/2)
	assert.Contains(t, compactSummaryLine(t, sessionFile(t, run)), agentCompactSummary)
}
