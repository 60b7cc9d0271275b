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

	r := runCLI(t, runOpts{}, "compact", "--full-history", "--agent-overhead", "0", "--strategy=structured", "--context-window", "64000", "--in-place", path)
	assert.Equal(t, ExitBusy, r.code, "%s%s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, path)
	assert.Contains(t, r.stderr, "close the agent")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(orig, data), "nothing was appended")
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

// An agent that appends to its session file while compact --in-place
// compacts it, lines landing before, during and after the append, loses
// none: after every run, the conversation the agent continues from the
// file holds each line it wrote, once and in order, and a compaction
// that went in is in it. The agent is a separate process writing without
// a lock, as Claude Code and Codex do; it writes fastest exactly while
// compact-host holds the file's lock, and every other run only then.
func TestCompactInPlaceWhileTheAgentWrites(t *testing.T) {
	runs := 50
	if testing.Short() || raceDetector {
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
				r := runCLI(t, runOpts{}, "compact", "--full-history", "--agent-overhead", "0", "--context-window", "6000", "--in-place", "--json", path)
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
					require.True(t, slices.ContainsFunc(s.Live(), func(m abi.Message) bool { return m.Summary }), "run %d: the compaction is in the conversation", run)
				}
			}
			t.Logf("%s: %d runs: %v; %d lines carried, at most %d appends in a run", format, runs, outcomes, carried, maxAppends)
			assert.Positive(t, outcomes["carried"], "the agent wrote while the compaction was appended, and its lines were carried")
		})
	}
}
