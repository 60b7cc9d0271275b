//go:build unix

package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A session file whose lock another program holds is refused with exit 7
// and a message naming the file and what to do; nothing is appended.
func TestCompactInPlaceRefusesALockedSession(t *testing.T) {
	path, orig := copyCorpus(t, "claude-code-swift-app.jsonl")
	holder, err := os.Open(path)
	require.NoError(t, err)
	defer holder.Close()
	require.NoError(t, syscall.Flock(int(holder.Fd()), syscall.LOCK_EX))

	r := runCLI(t, runOpts{}, "compact", "--strategy=structured", "--context-window", "64000", "--in-place", path)
	assert.Equal(t, ExitBusy, r.code, "%s%s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, path)
	assert.Contains(t, r.stderr, "close the agent")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(orig, data), "nothing was appended")
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

// TestAgentProcess is not a test: run by TestCompactInPlaceWhileTheAgentWrites
// as a separate process, it is an agent appending to its session file as
// Claude Code and Codex do (O_APPEND, one write a line, no lock) until
// its stdin closes, then prints how many lines it wrote. While another
// program holds the file's lock (as compact-host does while it checks and
// appends) it writes a line every 50 µs; otherwise a line a millisecond,
// or none when COMPACT_HOST_TEST_AGENT_QUIET is set, so that its lines
// land only while compact-host appends.
func TestAgentProcess(t *testing.T) {
	path, format := os.Getenv("COMPACT_HOST_TEST_AGENT_FILE"), os.Getenv("COMPACT_HOST_TEST_AGENT_FORMAT")
	quiet := os.Getenv("COMPACT_HOST_TEST_AGENT_QUIET") != ""
	if path == "" {
		t.Skip("run as the agent of TestCompactInPlaceWhileTheAgentWrites")
	}
	var stop atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop.Store(true)
	}()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	probe, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("ready")
	n, next := 0, time.Now()
	for !stop.Load() {
		locked := syscall.Flock(int(probe.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil
		if !locked {
			_ = syscall.Flock(int(probe.Fd()), syscall.LOCK_UN)
		}
		if !locked && (quiet || time.Now().Before(next)) {
			time.Sleep(20 * time.Microsecond)
			continue
		}
		n++
		if _, err := f.Write(agentLine(format, n)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		next = time.Now().Add(time.Millisecond)
		if locked {
			time.Sleep(50 * time.Microsecond)
		}
	}
	fmt.Println(n)
	os.Exit(0)
}

// startAgent starts TestAgentProcess on path; stop ends it and returns
// how many lines it wrote.
func startAgent(t *testing.T, path, format string, quiet bool) (stop func() int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAgentProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "COMPACT_HOST_TEST_AGENT_FILE="+path, "COMPACT_HOST_TEST_AGENT_FORMAT="+format)
	if quiet {
		cmd.Env = append(cmd.Env, "COMPACT_HOST_TEST_AGENT_QUIET=1")
	}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) string {
		select {
		case l, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("the agent process ended before it said %s: %s", what, stderr.String())
			}
			return l
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("the agent process did not say %s: %s", what, stderr.String())
		}
		return ""
	}
	require.Equal(t, "ready", next("it is ready"))
	return func() int {
		require.NoError(t, stdin.Close())
		n, err := strconv.Atoi(next("how many lines it wrote"))
		require.NoError(t, err)
		require.NoError(t, cmd.Wait(), stderr.String())
		return n
	}
}

// agentLinesSeen is the numbers of the agent's lines in the conversation
// the agent continues from the file, in order.
func agentLinesSeen(t *testing.T, path string) []int {
	t.Helper()
	s, err := formats.ReadFile(path)
	require.NoError(t, err)
	out := []int{}
	for _, m := range s.Compacted() {
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

// An agent that appends to its session file while compact --in-place
// compacts it, lines landing before, during and after the append, loses
// none: after every run, the conversation the agent continues from the
// file holds each line it wrote, once and in order, and a compaction
// that went in is in it. The agent is a separate process writing without
// a lock, as Claude Code and Codex do; it writes fastest exactly while
// compact-host holds the file's lock, and every other run only then.
func TestCompactInPlaceWhileTheAgentWrites(t *testing.T) {
	runs := 50
	if testing.Short() {
		runs = 10
	}
	for _, format := range []string{formats.ClaudeCode, formats.Codex} {
		t.Run(format, func(t *testing.T) {
			base := syntheticSession(format, 24)
			outcomes := map[string]int{}
			carried, maxAppends := 0, 0
			for run := 0; run < runs; run++ {
				path := filepath.Join(t.TempDir(), "session.jsonl")
				require.NoError(t, os.WriteFile(path, base, 0o644))
				stop := startAgent(t, path, format, run%2 == 1)
				r := runCLI(t, runOpts{}, "compact", "--context-window", "6000", "--in-place", "--json", path)
				wrote := stop()

				var rep struct {
					Action    string `json:"action"`
					WriteBack *struct {
						Outcome    string `json:"outcome"`
						AgentLines int    `json:"agent_lines"`
						Appends    int    `json:"appends"`
					} `json:"write_back"`
				}
				if r.stdout != "" {
					require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
				}
				outcome := "refused"
				if rep.WriteBack != nil {
					outcome = rep.WriteBack.Outcome
					carried += rep.WriteBack.AgentLines
					maxAppends = max(maxAppends, rep.WriteBack.Appends)
				} else if r.code == ExitOK {
					outcome = "appended"
				}
				outcomes[outcome]++
				switch r.code {
				case ExitOK:
					require.Equal(t, "compacted", rep.Action, r.stdout)
				case ExitBusy:
					require.Contains(t, []string{"refused", "rolled_back"}, outcome, "exit 7 leaves nothing of the compaction: %s", r.stderr)
				default:
					t.Fatalf("run %d: exit %d: %s%s", run, r.code, r.stdout, r.stderr)
				}
				require.Equal(t, seq(1, wrote), agentLinesSeen(t, path), "run %d (exit %d, %s): every line the agent wrote, once and in order", run, r.code, outcome)
				if r.code == ExitOK {
					s, err := formats.ReadFile(path)
					require.NoError(t, err)
					require.True(t, slices.ContainsFunc(s.Compacted(), func(m abi.Message) bool { return m.Summary }), "run %d: the compaction is in the conversation", run)
				}
			}
			t.Logf("%s: %d runs: %v; %d lines carried, at most %d appends in a run", format, runs, outcomes, carried, maxAppends)
			assert.Positive(t, outcomes["carried"], "the agent wrote while the compaction was appended, and its lines were carried")
		})
	}
}

func seq(from, to int) []int {
	out := []int{}
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
