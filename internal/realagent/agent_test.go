package realagent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeAgent writes a shell script that stands in for an agent: it writes
// its arguments, environment and working directory into its home and
// prints a line, so the harness's layout is checked without npm.
func fakeAgent(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$HOME/args\"\nenv > \"$HOME/env\"\npwd > \"$HOME/pwd\"\n" + body + "\necho done\n"
	require.NoError(t, os.WriteFile(p, []byte(script), 0o700))
	return p
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
	return p
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

const claudeSession = `{"type":"file-history-snapshot","messageId":"m0"}
{"type":"user","sessionId":"0b3c1e2a-5d4f-4a6b-9c8d-7e6f5a4b3c2d","message":{"role":"user","content":"hello"},"uuid":"u1"}
{"type":"assistant","sessionId":"0b3c1e2a-5d4f-4a6b-9c8d-7e6f5a4b3c2d","message":{"role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}]},"uuid":"a1"}
{"type":"assistant","sessionId":"0b3c1e2a-5d4f-4a6b-9c8d-7e6f5a4b3c2d","message":{"role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]},"uuid":"a2"}
`

func TestResumeLaysOutClaudeCode(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-of-the-machine")
	src := writeFile(t, "s.jsonl", claudeSession)
	run, err := Resume(context.Background(), ClaudeCode, Options{Bin: fakeAgent(t, ""), Session: src, Prompt: "go on", Dir: t.TempDir()})
	require.NoError(t, err)
	assert.Equal(t, "done\n", string(run.Stdout))
	assert.Equal(t, "0b3c1e2a-5d4f-4a6b-9c8d-7e6f5a4b3c2d", run.SessionID)

	work := readLines(t, filepath.Join(run.Home, "pwd"))[0]
	placed, err := os.ReadFile(filepath.Join(run.Home, ".claude", "projects", projectSlug(work), run.SessionID+".jsonl"))
	require.NoError(t, err, "the session is where Claude Code looks for the sessions of its working directory")
	assert.Equal(t, claudeSession, string(placed))
	assert.True(t, strings.HasPrefix(projectSlug(work), "-"), "%s", projectSlug(work))
	assert.NotContains(t, projectSlug(work), "/")

	assert.Equal(t, []string{"-p", "--resume", run.SessionID, "--model", "claude-sonnet-4-5", "go on"}, readLines(t, filepath.Join(run.Home, "args")),
		"the session's last model, not Claude Code's <synthetic>")
	env := readLines(t, filepath.Join(run.Home, "env"))
	assert.Contains(t, env, "ANTHROPIC_API_KEY=sk-ant-realagent-dummy", "the machine's key reached the agent")
	assert.Contains(t, env, "CLAUDE_CONFIG_DIR="+filepath.Join(run.Home, ".claude"))
	assert.Contains(t, env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	assertLoopbackOnly(t, env)
	assert.Empty(t, run.Requests)
}

// assertLoopbackOnly checks that the agent's base URL and every proxy
// variable point at loopback.
func assertLoopbackOnly(t *testing.T, env []string) {
	t.Helper()
	seen := 0
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "ANTHROPIC_BASE_URL":
			assert.True(t, strings.HasPrefix(v, "http://127.0.0.1:"), "%s", kv)
			seen++
		case "NO_PROXY":
			assert.Equal(t, "127.0.0.1,localhost", v)
		}
	}
	assert.GreaterOrEqual(t, seen, 6)
}

const codexRollout = `{"timestamp":"2026-07-06T09:18:54.805Z","type":"session_meta","payload":{"id":"019f36b8-7808-7b53-b256-85144c802798","timestamp":"2026-07-06T09:18:06.905Z","cwd":"/elsewhere"}}
{"timestamp":"2026-07-06T09:18:55.000Z","type":"turn_context","payload":{"model":"gpt-5.4"}}
{"timestamp":"2026-07-06T09:19:55.000Z","type":"turn_context","payload":{"model":"gpt-5.5"}}
`

func TestResumeLaysOutCodex(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-of-the-machine")
	src := writeFile(t, "r.jsonl", codexRollout)
	run, err := Resume(context.Background(), Codex, Options{Bin: fakeAgent(t, ""), Session: src, Prompt: "go on", Dir: t.TempDir()})
	require.NoError(t, err)
	id := "019f36b8-7808-7b53-b256-85144c802798"
	assert.Equal(t, id, run.SessionID)
	placed, err := os.ReadFile(filepath.Join(run.Home, ".codex", "sessions", "2026", "07", "06", "rollout-2026-07-06T09-18-06-"+id+".jsonl"))
	require.NoError(t, err, "the rollout is where and as Codex names it")
	assert.Equal(t, codexRollout, string(placed))
	config, err := os.ReadFile(filepath.Join(run.Home, ".codex", "config.toml"))
	require.NoError(t, err)
	assert.Regexp(t, `^openai_base_url = "http://127\.0\.0\.1:\d+/v1"\n\n\[analytics\]\nenabled = false\n$`, string(config))

	assert.Equal(t, []string{"exec", "--skip-git-repo-check", "resume", "--model", "gpt-5.5", id, "go on"}, readLines(t, filepath.Join(run.Home, "args")))
	env := readLines(t, filepath.Join(run.Home, "env"))
	assert.Contains(t, env, "OPENAI_API_KEY=sk-realagent-dummy")
	assert.Contains(t, env, "CODEX_HOME="+filepath.Join(run.Home, ".codex"))
	assertLoopbackOnly(t, append(env, "ANTHROPIC_BASE_URL=http://127.0.0.1:1"))

	run, err = Resume(context.Background(), Codex, Options{Bin: fakeAgent(t, ""), Session: src, Prompt: "go on", Model: "gpt-x", Dir: t.TempDir()})
	require.NoError(t, err)
	assert.Contains(t, readLines(t, filepath.Join(run.Home, "args")), "gpt-x", "Options.Model wins over the session's")
}

func TestProjectSlug(t *testing.T) {
	for dir, want := range map[string]string{
		"/tmp/a.b/c_d e":            "-tmp-a-b-c-d-e",
		"/Users/x/.worktrees/3":     "-Users-x--worktrees-3",
		"/home/é/\U0001F600":        "-home-----",
		"/srv/Project-2026/Go~tree": "-srv-Project-2026-Go-tree",
	} {
		assert.Equal(t, want, projectSlug(dir), "%q", dir)
	}
}

func TestResumeRefusesWhatIsNotASession(t *testing.T) {
	bin := fakeAgent(t, "")
	for _, tc := range []struct {
		agent Agent
		data  string
		want  string
	}{
		{ClaudeCode, "{}\n", "no record with a sessionId UUID; is it a Claude Code session?"},
		{ClaudeCode, `{"sessionId":"../../etc"}` + "\n", "no record with a sessionId UUID"},
		{Codex, codexRollout[strings.Index(codexRollout, "\n")+1:], "no session_meta record with a UUID id; is it a Codex rollout?"},
		{Codex, `{"type":"session_meta","payload":{"id":"019f36b8-7808-7b53-b256-85144c802798","timestamp":"yesterday"}}` + "\n", `session_meta timestamp "yesterday"`},
		{"aider", claudeSession, `unknown agent "aider"`},
	} {
		src := writeFile(t, "s.jsonl", tc.data)
		_, err := Resume(context.Background(), tc.agent, Options{Bin: bin, Session: src, Dir: t.TempDir()})
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
	}
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 100), strings.Repeat("e", 100))
	require.NoError(t, os.MkdirAll(deep, 0o700))
	_, err := Resume(context.Background(), ClaudeCode, Options{Bin: bin, Session: writeFile(t, "s.jsonl", claudeSession), Dir: deep})
	assert.ErrorContains(t, err, "is too deep")
	_, err = Resume(context.Background(), ClaudeCode, Options{Bin: bin, Session: filepath.Join(t.TempDir(), "absent.jsonl"), Dir: t.TempDir()})
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "absent.jsonl")
	_, err = Resume(context.Background(), ClaudeCode, Options{Session: "x"})
	assert.ErrorContains(t, err, "Options.Bin, Session and Dir are required")
}

func TestResumeReportsAFailingAgent(t *testing.T) {
	src := writeFile(t, "s.jsonl", claudeSession)
	run, err := Resume(context.Background(), ClaudeCode, Options{Bin: fakeAgent(t, "echo 'No conversation found' >&2; exit 1"), Session: src, Dir: t.TempDir()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exit status 1")
	assert.Contains(t, err.Error(), "No conversation found", "the agent's stderr is in the error")
	require.NotNil(t, run)
	assert.Equal(t, "No conversation found\n", string(run.Stderr))
}

// An agent that hangs, with a child of its own, is ended with its child
// when the deadline passes.
func TestResumeEndsAHangingAgent(t *testing.T) {
	src := writeFile(t, "s.jsonl", claudeSession)
	bin := fakeAgent(t, `sleep 300 & echo $! > "$HOME/child"; wait`)
	run, err := Resume(context.Background(), ClaudeCode, Options{Bin: bin, Session: src, Dir: t.TempDir(), Timeout: 500 * time.Millisecond})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "did not finish within 500ms")
	pid, err := strconv.Atoi(readLines(t, filepath.Join(run.Home, "child"))[0])
	require.NoError(t, err)
	// The child was killed with its group; once its new parent reaps it,
	// it is gone. The wait is bounded and only a hang guard.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if errors.Is(err, os.ErrNotExist) || (err == nil && strings.Contains(string(stat), ") Z ")) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the agent's child %d outlived the run: %s", pid, stat)
	}
}
