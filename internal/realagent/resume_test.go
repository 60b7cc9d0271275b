package realagent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/compact-host/compact-host/internal/cli"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	resumePrompt = "realagent resume check: answer with one word."
	resumeReply  = "RESUMED-7f3a"
)

// corpusResumes are the corpus files the agents resume; compacted marks
// the files the agent had compacted itself.
var corpusResumes = []struct {
	file      string
	agent     Agent
	compacted bool
}{
	{"claude-code-go-cli.jsonl", ClaudeCode, false},
	{"claude-code-swift-app.jsonl", ClaudeCode, true},
	{"codex-typescript.jsonl", Codex, true},
}

// gapRow is one line of the measurement: what inspect reports of a file
// against what the agent sent when it resumed it.
type gapRow struct {
	file    string
	inspect int
	sent    Sent
}

// TestResumeCorpus resumes each corpus file with the real agent against
// the fake upstream and checks that the model call carries the file's
// history as the agent keeps it: the new prompt, the last user message,
// every tool call after the agent's last compaction and its summary, and
// none of the calls it folded. Under -v it prints what the agent sent
// against what `compact-host inspect` reports of the file today.
func TestResumeCorpus(t *testing.T) {
	e, err := InspectEngine()
	require.NoError(t, err)
	var rows []gapRow
	for _, tc := range corpusResumes {
		t.Run(tc.file, func(t *testing.T) {
			bin := agentBin(t, tc.agent)
			src := corpusPath(t, tc.file)
			before := fileSum(t, src)
			run, err := Resume(context.Background(), tc.agent, Options{Bin: bin, Session: src, Prompt: resumePrompt, Reply: resumeReply, Dir: t.TempDir()})
			require.NoError(t, err)
			assert.Equal(t, before, fileSum(t, src), "the corpus file itself was changed")
			assert.Contains(t, string(run.Stdout), resumeReply, "the agent did not print the upstream's answer")
			logOtherRequests(t, run)

			calls := run.ModelCalls()
			require.Len(t, calls, 1, "one turn, one model call: %s", describe(run.Requests))
			body := calls[0].Body
			sent := jsonStrings(t, body)
			facts := claudeCodeFacts
			if tc.agent == Codex {
				facts = codexFacts
			}
			f := facts(t, src)
			assert.True(t, containsText(sent, resumePrompt), "the request lacks the resume prompt")
			require.NotEmpty(t, f.LastUser)
			assert.True(t, containsText(sent, f.LastUser), "the request lacks the file's last user message %.80q", f.LastUser)
			require.NotEmpty(t, f.Kept)
			for _, id := range f.Kept {
				assert.True(t, sent[id], "tool call %s of the kept history is not in the request", id)
			}
			if tc.compacted {
				require.NotEmpty(t, f.Summary, "the file has no summary of the agent's")
				require.NotEmpty(t, f.Folded)
				assert.True(t, sent[f.Summary], "the request lacks the agent's summary %.80q", f.Summary)
				for _, id := range f.Folded {
					assert.False(t, containsText(sent, id), "tool call %s, folded by the agent's compaction, is in the request", id)
				}
			} else {
				assert.Empty(t, f.Folded)
			}
			assertResumedInPlace(t, tc.agent, run)

			counted, err := CountSent(e, tc.agent, body)
			require.NoError(t, err)
			assert.Positive(t, counted.Conversation)
			assert.Positive(t, counted.System, "the agent sent no system prompt")
			assert.Positive(t, counted.Tools, "the agent sent no tool schemas")
			// CountSent counts as inspect counts: the recorded request,
			// given to inspect, gives the same conversation and system.
			assert.Equal(t, counted.Conversation+counted.System, inspectTokens(t, requestAsFile(t, tc.agent, body)))
			rows = append(rows, gapRow{tc.file, inspectTokens(t, src), counted})
		})
	}
	if len(rows) > 0 {
		t.Log("what the agent sent on resume against what compact-host inspect reports of the file (tokens, " + e.Tokenizer() + "):\n" + gapTable(rows))
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(data)
}

// assertResumedInPlace checks that the agent appended the turn to the
// session file it was given, not to a new session.
func assertResumedInPlace(t *testing.T, agent Agent, run *Run) {
	t.Helper()
	data, err := os.ReadFile(resumedFile(t, agent, run))
	require.NoError(t, err)
	assert.Contains(t, string(data), resumeReply, "the answer was not recorded in the resumed session")
}

// logOtherRequests logs what the agent sent besides model calls: a
// WebSocket attempt, a request for another host.
func logOtherRequests(t *testing.T, run *Run) {
	t.Helper()
	for i, q := range run.Requests {
		switch {
		case q.WebSocket:
			assert.Equal(t, 426, q.Status)
			t.Logf("request %d: %s %s asked for a WebSocket; refused with 426, the agent went on over HTTP", i, q.Method, q.Path)
		case q.Method == "CONNECT" || strings.Contains(q.Path, "://"):
			t.Logf("request %d: %s %s would have left the machine; refused with %d", i, q.Method, q.Path, q.Status)
		case q.Status == 404:
			t.Logf("request %d: %s %s answered 404", i, q.Method, q.Path)
		}
	}
}

func describe(reqs []Request) string {
	var parts []string
	for _, q := range reqs {
		parts = append(parts, fmt.Sprintf("%s %s (%d)", q.Method, q.Path, q.Status))
	}
	return strings.Join(parts, ", ")
}

// requestAsFile writes a recorded request where inspect can read it: an
// Anthropic request as it is, a Responses request as the rollout lines
// its items are.
func requestAsFile(t *testing.T, agent Agent, body []byte) string {
	t.Helper()
	data := body
	if agent == Codex {
		var top struct {
			Instructions string          `json:"instructions"`
			Input        json.RawMessage `json:"input"`
		}
		require.NoError(t, json.Unmarshal(body, &top))
		var err error
		data, err = responsesAsRollout(top.Instructions, top.Input)
		require.NoError(t, err)
	}
	p := filepath.Join(t.TempDir(), "request")
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// inspectTokens runs `compact-host inspect --json` on path, with no
// config file and no provider, and returns the tokens it reports.
func inspectTokens(t *testing.T, path string) int {
	t.Helper()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	env := map[string]string{"XDG_CONFIG_HOME": dir, "COMPACT_HOST_PLUGINS_DIR": filepath.Join(dir, "plugins")}
	code := cli.Run(context.Background(), []string{"inspect", "--json", "--largest", "0", path},
		cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }})
	require.Equal(t, 0, code, "compact-host inspect %s: %s", path, errOut.String())
	var r struct {
		Tokens int `json:"tokens"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &r), "%s", out.String())
	return r.Tokens
}

func gapTable(rows []gapRow) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "file\tinspect today\tsent: messages\tsystem\ttools\tsent total\topaque items\tsent − inspect\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%+d\t\n", r.file, r.inspect, r.sent.Conversation, r.sent.System, r.sent.Tools, r.sent.Total(), r.sent.Opaque, r.sent.Total()-r.inspect)
	}
	w.Flush()
	return b.String()
}
