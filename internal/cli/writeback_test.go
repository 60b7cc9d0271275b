package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

			r := runCLI(t, runOpts{}, "compact", "--full-history", "--agent-overhead", "0", "--strategy=structured", "--context-window", "64000", "--in-place", "--json", path)
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
			got := after.Live()
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
			r := runCLI(t, runOpts{}, "compact", "--full-history", "--agent-overhead", "0", "--strategy=structured", "--context-window", "64000", "-o", out, path)
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
			assert.True(t, slices.ContainsFunc(s.Live(), func(m abi.Message) bool { return m.Summary }))

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
	r := runCLI(t, runOpts{}, "compact", "--full-history", "--agent-overhead", "0", "--strategy=structured", "--context-window", "64000", "--in-place", path)
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
	r := runCLI(t, runOpts{}, "compact", "--full-history", "--agent-overhead", "0", "--strategy=structured", "--context-window", "64000", "--in-place", path)
	assert.Equal(t, ExitBusy, r.code, "%s%s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, path+": the log changed on disk: its last line is not complete yet")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(torn, data), "nothing was appended")
}

// --in-place on a format no agent takes back is a usage error.
func TestCompactInPlaceOtherFormats(t *testing.T) {
	path, _ := copyCorpus(t, "copilot-cli.jsonl")
	r := runCLI(t, runOpts{}, "compact", "--full-history", "--agent-overhead", "0", "--context-window", "64000", "--in-place", path)
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
	r := runCLI(t, runOpts{}, "compact", "--full-history", "--agent-overhead", "0", "--strategy=structured", "--context-window", "32000", "--in-place", "--json", path)
	require.Equal(t, ExitOK, r.code, "%s%s", r.stdout, r.stderr)
	var rep compactReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	after, err := formats.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, modelView(before.Messages), modelView(after.Messages), "the original lines keep the full text")
	pinned, kept := compactedView(t, before, rep)
	got := after.Live()
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

// agentDuringSummary is a loopback provider that, when asked for a
// summary, appends lines to path as the agent would while compact-host
// works (the file was read, the compaction is not yet appended), then
// fails, so the compaction falls back to the offline strategies.
func agentDuringSummary(t *testing.T, path string, lines []byte) *httptest.Server {
	t.Helper()
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		once.Do(func() {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				_, err = f.Write(lines)
				f.Close()
			}
			assert.NoError(t, err)
		})
		http.Error(w, `{"type":"error","error":{"type":"api_error","message":"down"}}`, http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// compactWithAgent compacts path in place while the agent appends lines
// during the summary.
func compactWithAgent(t *testing.T, path string, lines []byte, extra ...string) result {
	t.Helper()
	srv := agentDuringSummary(t, path, lines)
	config := writeFile(t, "config.toml", "[provider]\nmax_retries = 0\n")
	args := append([]string{"--config", config, "compact", "--full-history", "--agent-overhead", "0", "--provider", "anthropic", "--base-url", srv.URL,
		"--context-window", "6000", "--in-place"}, extra...)
	return runCLI(t, runOpts{env: map[string]string{"ANTHROPIC_API_KEY": "test-key"}}, append(args, path)...)
}

// Lines the agent writes while compact-host summarizes land before the
// compaction: they are carried after it, the report says so, and undo
// takes away only what compact-host wrote, leaving the agent's lines.
func TestCompactInPlaceCarriesLinesWrittenMeanwhile(t *testing.T) {
	for _, format := range []string{formats.ClaudeCode, formats.Codex} {
		t.Run(format, func(t *testing.T) {
			base := syntheticSession(format, 24)
			path := writeFile(t, "session.jsonl", string(base))
			var agent []byte
			for n := 1; n <= 3; n++ {
				agent = append(agent, agentLine(format, n)...)
			}
			r := compactWithAgent(t, path, agent, "--json")
			require.Equal(t, ExitOK, r.code, "%s%s", r.stdout, r.stderr)
			var rep compactReport
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
			require.NotNil(t, rep.WriteBack)
			assert.Equal(t, writeBackReport{Outcome: "carried", AgentLines: 3, CarriedBytes: rep.WriteBack.CarriedBytes, Appends: 2}, *rep.WriteBack)
			assert.Positive(t, rep.WriteBack.CarriedBytes)
			assert.Equal(t, []int{1, 2, 3}, agentLinesSeen(t, path))
			s, err := formats.ReadFile(path)
			require.NoError(t, err)
			got := s.Live()
			i := slices.IndexFunc(got, func(m abi.Message) bool { return m.Summary })
			require.GreaterOrEqual(t, i, 0, "the compaction is in the conversation")
			assert.Equal(t, "agent line 3", got[len(got)-1].Content[0].Text, "the agent's lines come after it")

			r = runCLI(t, runOpts{}, "undo", path)
			require.Equal(t, ExitOK, r.code, "%s%s", r.stdout, r.stderr)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(base)+string(agent), string(data), "the file as the agent left it")
		})
	}
}

// The text report names the outcome.
func TestCompactInPlaceCarriedTextReport(t *testing.T) {
	path := writeFile(t, "session.jsonl", string(syntheticSession(formats.ClaudeCode, 24)))
	r := compactWithAgent(t, path, agentLine(formats.ClaudeCode, 1))
	require.Equal(t, ExitOK, r.code, "%s%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "the agent wrote 1 line while the compaction was appended; carried after it (2 appends")
}

// Lines that cannot be carried (the agent compacted the conversation
// itself meanwhile) roll the compaction back: exit 7, the report and the
// message say so, and the file holds exactly what the agent wrote.
func TestCompactInPlaceRollsBackWhatCannotBeCarried(t *testing.T) {
	own := map[string]string{
		formats.ClaudeCode: `{"parentUuid":null,"isSidechain":false,"sessionId":"5e55a000-0000-4000-8000-000000000000","type":"system","subtype":"compact_boundary","content":"Conversation compacted","uuid":"b0000000-0000-4000-8000-000000000000","timestamp":"2030-06-01T00:00:00.000Z","compactMetadata":{"trigger":"auto","preTokens":1}}` + "\n",
		formats.Codex:      `{"timestamp":"2030-06-01T00:00:00.000Z","type":"compacted","payload":{"message":"the agent's own","replacement_history":[]}}` + "\n",
	}
	for _, format := range []string{formats.ClaudeCode, formats.Codex} {
		t.Run(format, func(t *testing.T) {
			base := syntheticSession(format, 24)
			path := writeFile(t, "session.jsonl", string(base))
			agent := append(agentLine(format, 1), own[format]...)
			r := compactWithAgent(t, path, agent, "--json")
			require.Equal(t, ExitBusy, r.code, "%s%s", r.stdout, r.stderr)
			assert.Contains(t, r.stderr, "the agent compacted the conversation itself meanwhile")
			assert.Contains(t, r.stderr, "the compaction was taken back")
			var rep compactReport
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
			require.NotNil(t, rep.WriteBack)
			assert.Equal(t, "rolled_back", rep.WriteBack.Outcome)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(base)+string(agent), string(data))

			r = runCLI(t, runOpts{}, "undo", path)
			assert.Equal(t, ExitInput, r.code, "nothing of ours to undo: %s", r.stderr)
		})
	}
}

// syntheticSession is a small session of format with turns exchanges of
// a few hundred bytes each: enough to compact at a small window.
func syntheticSession(format string, turns int) []byte {
	var b bytes.Buffer
	filler := strings.Repeat("the parser keeps the offsets of every token it reads, ", 8)
	t0 := time.Date(2030, 5, 1, 10, 0, 0, 0, time.UTC)
	at := func(i int) string { return t0.Add(time.Duration(i) * time.Second).Format("2006-01-02T15:04:05.000Z") }
	switch format {
	case formats.ClaudeCode:
		parent := "null"
		for i := 0; i < turns; i++ {
			u, a := fmt.Sprintf("5e55a000-0000-4000-8000-%012d", 2*i), fmt.Sprintf("5e55a000-0000-4000-8000-%012d", 2*i+1)
			fmt.Fprintf(&b, `{"parentUuid":%s,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"5e55a000-0000-4000-8000-000000000000","version":"2.1.47","type":"user","message":{"role":"user","content":"question %d: %s"},"uuid":%q,"timestamp":%q}`+"\n", parent, i, filler, u, at(2*i))
			fmt.Fprintf(&b, `{"parentUuid":%q,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"5e55a000-0000-4000-8000-000000000000","version":"2.1.47","type":"assistant","message":{"id":"msg_%d","role":"assistant","content":[{"type":"text","text":"answer %d: %s"}]},"uuid":%q,"timestamp":%q}`+"\n", u, i, i, filler, a, at(2*i+1))
			parent = strconv.Quote(a)
		}
	case formats.Codex:
		fmt.Fprintf(&b, `{"timestamp":%q,"type":"session_meta","payload":{"id":"019f36b8-7808-7b53-b256-000000000000","timestamp":%q,"cwd":"/w","cli_version":"0.1","base_instructions":{"text":"You are a coding agent."}}}`+"\n", at(0), at(0))
		for i := 0; i < turns; i++ {
			fmt.Fprintf(&b, `{"timestamp":%q,"type":"turn_context","payload":{"turn_id":"turn-%d","model":"gpt-x"}}`+"\n", at(2*i), i)
			fmt.Fprintf(&b, `{"timestamp":%q,"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"question %d: %s"}]}}`+"\n", at(2*i), i, filler)
			fmt.Fprintf(&b, `{"timestamp":%q,"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer %d: %s"}]}}`+"\n", at(2*i+1), i, filler)
		}
	}
	return b.Bytes()
}

// agentLine is line n as the agent of format appends it.
func agentLine(format string, n int) []byte {
	ts := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	if format == formats.ClaudeCode {
		return fmt.Appendf(nil, `{"parentUuid":"a9e00000-0000-4000-8000-%012d","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"5e55a000-0000-4000-8000-000000000000","version":"2.1.47","type":"user","message":{"role":"user","content":"agent line %d"},"uuid":"a9e00000-0000-4000-8000-%012d","timestamp":%q}`+"\n", n-1, n, n, ts)
	}
	return fmt.Appendf(nil, `{"timestamp":%q,"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"agent line %d"}]}}`+"\n", ts, n)
}

// agentLinesSeen is the numbers of the agent's lines in the conversation
// the agent continues from the file, in order.
func agentLinesSeen(t *testing.T, path string) []int {
	t.Helper()
	s, err := formats.ReadFile(path)
	require.NoError(t, err)
	out := []int{}
	for _, m := range s.Live() {
		for _, b := range m.Content {
			if rest, ok := strings.CutPrefix(b.Text, "agent line "); ok {
				n, err := strconv.Atoi(rest)
				require.NoError(t, err)
				out = append(out, n)
			}
		}
	}
	return out
}

func seq(from, to int) []int {
	out := []int{}
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
