package realagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"

	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/internal/cli"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// liveReport is what these tests read of `compact-host inspect --json`.
type liveReport struct {
	// Tokens is the live context; Request adds the agent's overhead.
	Tokens              int    `json:"tokens"`
	HistoryTokens       int    `json:"history_tokens"`
	AgentOverhead       int    `json:"agent_overhead"`
	AgentOverheadSource string `json:"agent_overhead_source"`
	Request             int    `json:"request_tokens"`
	FileCompactions     []struct {
		By string `json:"by"`
	} `json:"file_compactions"`
}

// compactHost runs the command line in process with args, with no config
// file, no plugins directory and a cache directory of its own, as a new
// user has it; it returns the exit code, stdout and stderr.
func compactHost(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": dir, "COMPACT_HOST_PLUGINS_DIR": filepath.Join(dir, "plugins"), "COMPACT_HOST_CACHE_DIR": filepath.Join(dir, "cache")}
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), args, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errOut.String()
}

// inspectLive runs `compact-host inspect --json --largest 0 <args> path`.
func inspectLive(t *testing.T, path string, args ...string) liveReport {
	t.Helper()
	code, out, errOut := compactHost(t, append(append([]string{"inspect", "--json", "--largest", "0"}, args...), path)...)
	require.Equal(t, 0, code, "compact-host inspect %s: %s", path, errOut)
	var r liveReport
	require.NoError(t, json.Unmarshal([]byte(out), &r), "%s", out)
	return r
}

// compactFor runs `compact-host compact --provider none --in-place
// --context-window <window> --agent-overhead <overhead> path`: the offline
// strategy, no provider, as the README gives it.
func compactFor(t *testing.T, path string, window, overhead int) {
	t.Helper()
	code, _, errOut := compactHost(t, "compact", "--provider", "none", "--in-place", "--context-window", strconv.Itoa(window),
		"--agent-overhead", strconv.Itoa(overhead), path)
	require.Equal(t, 0, code, "compact-host compact --in-place %s: %s", path, errOut)
}

// overheadSource is the corpus file whose head measures an agent's
// overhead.
var overheadSource = map[Agent]string{ClaudeCode: "claude-code-go-cli.jsonl", Codex: "codex-typescript.jsonl"}

// measured holds each agent's overhead once measured: every test of the
// run uses the same figure, as a user measures it once.
var measured struct {
	sync.Mutex
	tokens map[Agent]int
}

// agentOverhead is what the installed agent adds to a request beyond the
// messages inspect counts in the file it resumes (its system prompt, its
// tool schemas, what it adds on a resumed turn), measured as a user
// would: resume a short session (the head of a corpus file, through the
// agent's first answer), count the request as inspect counts a file, and
// take away what inspect counts of the session. Nothing is tuned: the
// figure is the installed agent's.
func agentOverhead(t *testing.T, agent Agent, bin string) int {
	t.Helper()
	measured.Lock()
	defer measured.Unlock()
	if n, ok := measured.tokens[agent]; ok {
		return n
	}
	short := filepath.Join(t.TempDir(), "short.jsonl")
	require.NoError(t, os.WriteFile(short, headThroughFirstAnswer(t, agent, corpusPath(t, overheadSource[agent])), 0o600))
	_, _, sent := resumeOnce(t, agent, bin, short)
	file := inspectLive(t, short, "--agent-overhead", "0").Tokens
	n := sent.Total() - file
	t.Logf("%s overhead: %d tokens (sent %d: messages %d, system %d, tools %d; inspect counts %d of the short session)",
		agent, n, sent.Total(), sent.Conversation, sent.System, sent.Tools, file)
	require.Positive(t, n)
	if measured.tokens == nil {
		measured.tokens = map[Agent]int{}
	}
	measured.tokens[agent] = n
	return n
}

// resumeOnce resumes path with the agent for one turn and returns the
// run, its one model call's body, and that call counted as inspect counts
// a file.
func resumeOnce(t *testing.T, agent Agent, bin, path string) (*Run, []byte, Sent) {
	t.Helper()
	run, err := Resume(context.Background(), agent, Options{Bin: bin, Session: path, Prompt: resumePrompt, Reply: resumeReply, Dir: t.TempDir()})
	require.NoError(t, err)
	calls := run.ModelCalls()
	require.Len(t, calls, 1, "one turn, one model call: %s", describe(run.Requests))
	e, err := InspectEngine()
	require.NoError(t, err)
	sent, err := CountSent(e, agent, calls[0].Body)
	require.NoError(t, err)
	return run, calls[0].Body, sent
}

// headThroughFirstAnswer is the lines of a session file up to and with
// the agent's first answer in text.
func headThroughFirstAnswer(t *testing.T, agent Agent, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var head []byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		head = append(append(head, sc.Bytes()...), '\n')
		var r map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		answer := false
		if agent == Codex {
			p := obj(r["payload"])
			answer = str(r["type"]) == "response_item" && str(p["type"]) == "message" && str(p["role"]) == "assistant"
		} else if str(r["type"]) == "assistant" {
			for _, b := range list(obj(r["message"])["content"]) {
				answer = answer || str(obj(b)["type"]) == "text"
			}
		}
		if answer {
			return head
		}
	}
	t.Fatalf("%s: no answer of the agent's", path)
	return nil
}

// smallWindow is the second, smaller window each agent's files are
// compacted for: what is left after the agent's overhead holds the
// summary, the instructions the agent keeps and the latest exchange.
var smallWindow = map[Agent]int{ClaudeCode: 36_000, Codex: 26_000}

// liveRow is one line of the measurement.
type liveRow struct {
	file, stage string
	window      int
	report      liveReport
	sent        Sent
}

// TestContextNowIsWhatTheAgentSends resumes the corpus Claude Code and
// Codex files with the real agents three ways: as recorded, after
// `compact --in-place` for a 48k window, and after a second one for a
// smaller window (36k for Claude Code, 26k for Codex). Each time, the
// request `inspect --json` reports (the live context plus
// --agent-overhead, measured from the installed agent as a user would)
// is within 5% of what the agent sent, counted the same way from the
// recorded request; after a compaction for a window, the agent's request
// fits it.
func TestContextNowIsWhatTheAgentSends(t *testing.T) {
	e, err := InspectEngine()
	require.NoError(t, err)
	var rows []liveRow
	var mu sync.Mutex
	for _, tc := range corpusResumes {
		t.Run(tc.file, func(t *testing.T) {
			bin := agentBin(t, tc.agent)
			overhead := agentOverhead(t, tc.agent, bin)
			data, err := os.ReadFile(corpusPath(t, tc.file))
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), tc.file)
			require.NoError(t, os.WriteFile(path, data, 0o600))
			var instructions []string
			if tc.agent == Codex {
				instructions = replacementInstructions(t, path)
				require.NotEmpty(t, instructions, "the agent's last compaction kept no developer instructions")
			}
			for _, st := range []struct {
				stage  string
				window int
			}{{"as recorded", 0}, {"in place, 48k", inPlaceWindow}, {"in place again, smaller", smallWindow[tc.agent]}} {
				if st.window > 0 {
					compactFor(t, path, st.window, overhead)
				}
				r := inspectLive(t, path, "--agent-overhead", strconv.Itoa(overhead))
				require.Equal(t, overhead, r.AgentOverhead)
				require.Equal(t, "flag", r.AgentOverheadSource)
				_, body, sent := resumeOnce(t, tc.agent, bin, path)
				mu.Lock()
				rows = append(rows, liveRow{tc.file, st.stage, st.window, r, sent})
				mu.Unlock()
				assert.InEpsilon(t, sent.Total(), r.Request, 0.05, "%s: inspect's request against what the agent sent", st.stage)
				if tc.agent == Codex {
					// Codex keeps its permissions in the replacement
					// history: a compaction of ours keeps them there.
					sentText := jsonStrings(t, body)
					for _, text := range instructions {
						assert.True(t, sentText[text], "%s: Codex resumed without the developer instructions %.60q", st.stage, text)
					}
				}
				if st.window > 0 {
					assert.LessOrEqual(t, sent.Total(), st.window, "%s: the agent's request after compacting for a %d-token window", st.stage, st.window)
					n := 0
					for _, c := range r.FileCompactions {
						if c.By == "compact-host" {
							n++
						}
					}
					assert.Positive(t, n, "%s: inspect lists no compaction of ours", st.stage)
				}
			}
		})
	}
	if len(rows) > 0 {
		t.Log("inspect's request (live context + --agent-overhead) against what the agent sent (tokens, " + e.Tokenizer() + "):\n" + liveTable(rows))
	}
}

// replacementInstructions are the texts of the developer messages of a
// Codex rollout's last replacement history: the instructions Codex goes on
// with after its compaction.
func replacementInstructions(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, r := range records(t, path) {
		if str(r["type"]) != "compacted" {
			continue
		}
		out = nil
		for _, it := range list(obj(r["payload"])["replacement_history"]) {
			if str(obj(it)["role"]) != "developer" {
				continue
			}
			for _, c := range list(obj(it)["content"]) {
				if text := str(obj(c)["text"]); text != "" {
					out = append(out, text)
				}
			}
		}
	}
	return out
}

func liveTable(rows []liveRow) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "file\tstage\twindow\tlive context\toverhead\tinspect: request\tagent sent\tdifference\t")
	for _, r := range rows {
		window := "-"
		if r.window > 0 {
			window = strconv.Itoa(r.window)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%+.1f%%\t\n", r.file, r.stage, window, r.report.Tokens, r.report.AgentOverhead,
			r.report.Request, r.sent.Total(), 100*float64(r.report.Request-r.sent.Total())/float64(r.sent.Total()))
	}
	w.Flush()
	return b.String()
}

// repeatedWindows are the windows of ten successive `compact --in-place`
// runs: shrinking by 2k from 64k for Claude Code, whose overhead is about
// 21k, and by 4k for Codex.
var repeatedWindows = map[Agent][]int{
	ClaudeCode: {64_000, 62_000, 60_000, 58_000, 56_000, 54_000, 52_000, 50_000, 48_000, 46_000},
	Codex:      {64_000, 60_000, 56_000, 52_000, 48_000, 44_000, 40_000, 36_000, 32_000, 28_000},
}

// TestRepeatedInPlaceThenTheAgentResumes compacts a corpus file in place
// ten times at a shrinking window, then resumes it with the real agent.
// Each run appends one block, exactly the file's growth, and leaves the
// bytes before it as they were; the agent resumes the last of them, and
// its request fits the last window and is what inspect reported. Undo
// needs nothing but the file: on a moved copy it takes the last block
// away byte for byte; once the agent wrote its turn after our block, it
// exits 7 and changes nothing.
func TestRepeatedInPlaceThenTheAgentResumes(t *testing.T) {
	for _, tc := range []struct {
		file  string
		agent Agent
	}{{"claude-code-go-cli.jsonl", ClaudeCode}, {"codex-typescript.jsonl", Codex}} {
		t.Run(tc.file, func(t *testing.T) {
			bin := agentBin(t, tc.agent)
			overhead := agentOverhead(t, tc.agent, bin)
			orig, err := os.ReadFile(corpusPath(t, tc.file))
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), tc.file)
			require.NoError(t, os.WriteFile(path, orig, 0o600))
			prev, beforeLast, blocks := orig, []byte(nil), 0
			windows := repeatedWindows[tc.agent]
			for run, window := range windows {
				compactFor(t, path, window, overhead)
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				require.True(t, bytes.HasPrefix(data, prev), "run %d rewrote the bytes before its block", run)
				if len(data) > len(prev) {
					b, err := formats.FindAppended(data)
					require.NoError(t, err, "run %d", run)
					assert.Equal(t, int64(len(prev)), b.Offset, "run %d: the block names the bytes it was appended to", run)
					assert.Equal(t, int64(len(data)), b.End, "run %d: the file grew by its block alone", run)
					blocks++
					beforeLast = prev
				}
				prev = data
			}
			require.GreaterOrEqual(t, blocks, 2, "the later runs compacted the compacted file")
			last := windows[len(windows)-1]
			r := inspectLive(t, path, "--agent-overhead", strconv.Itoa(overhead))

			run, _, sent := resumeOnce(t, tc.agent, bin, path)
			t.Logf("%s: %d blocks in %d runs; the agent sent %d tokens at a %d window; inspect said %d", tc.file, blocks, len(windows), sent.Total(), last, r.Request)
			assert.LessOrEqual(t, sent.Total(), last, "the agent's request after compacting for a %d-token window", last)
			assert.InEpsilon(t, sent.Total(), r.Request, 0.05, "inspect's request against what the agent sent")

			// Undo on a moved copy: no record under the cache dir names it.
			moved := filepath.Join(t.TempDir(), "moved.jsonl")
			require.NoError(t, os.WriteFile(moved, prev, 0o600))
			code, _, errOut := compactHost(t, "undo", moved)
			require.Equal(t, cli.ExitOK, code, "undo %s: %s", moved, errOut)
			got, err := os.ReadFile(moved)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(beforeLast, got), "undo on a moved copy restores the file before the last block, byte for byte")

			// The agent wrote its turn after our block: undo refuses.
			resumed := resumedFile(t, tc.agent, run)
			before, err := os.ReadFile(resumed)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(before, prev), "the agent appended its turn to the file it resumed")
			require.Greater(t, len(before), len(prev))
			code, _, errOut = compactHost(t, "undo", resumed)
			assert.Equal(t, cli.ExitBusy, code, "undo after the agent's turn: %s", errOut)
			after, err := os.ReadFile(resumed)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(before, after), "a refused undo changes nothing")
		})
	}
}

// resumedFile is the session file the agent resumed and wrote its turn
// to.
func resumedFile(t *testing.T, agent Agent, run *Run) string {
	t.Helper()
	pattern := filepath.Join(run.Home, ".claude", "projects", "*", run.SessionID+".jsonl")
	if agent == Codex {
		pattern = filepath.Join(run.Home, ".codex", "sessions", "*", "*", "*", "rollout-*-"+run.SessionID+".jsonl")
	}
	files, err := filepath.Glob(pattern)
	require.NoError(t, err)
	require.Len(t, files, 1, "the session file the agent resumed")
	return files[0]
}
