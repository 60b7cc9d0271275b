package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/internal/cli"
	"github.com/compact-host/compact-host/internal/proctest"
	"github.com/compact-host/compact-host/internal/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveCLI runs `compact-host serve` with args and the environment env,
// and returns its stderr lines as they come and its exit code when it
// ends.
func serveCLI(t *testing.T, env map[string]string, args ...string) (<-chan string, <-chan int) {
	t.Helper()
	return serveCLIWithPlugins(t, t.TempDir(), env, args...)
}

// serveCLIWithPlugins is serveCLI with pluginsDir as the plugins
// directory.
func serveCLIWithPlugins(t *testing.T, pluginsDir string, env map[string]string, args ...string) (<-chan string, <-chan int) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	toml := fmt.Sprintf("cache_dir = %q\nplugins_dir = %q\n", server.CLICacheDir(), pluginsDir)
	require.NoError(t, os.WriteFile(cfg, []byte(toml), 0o644))
	pr, pw := io.Pipe()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	code := make(chan int, 1)
	go func() {
		defer pw.Close()
		code <- cli.Main(append([]string{"serve", "--config", cfg}, args...), cli.IO{
			In: strings.NewReader(""), Out: io.Discard, Err: pw,
			Getenv: func(k string) string { return env[k] },
		})
	}()
	return lines, code
}

// TestServeCommand starts the real command on a loopback port, calls it,
// and stops it with SIGINT as a terminal would.
func TestServeCommand(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGINT to self")
	}
	lines, code := serveCLI(t, map[string]string{"API_TOKEN": "t0ken"},
		"--addr", "127.0.0.1:0", "--token-env", "API_TOKEN", "--provider", "none",
		"--context-window", "20000", "--max-output-tokens", "2000", "--tokenizer", "chars")
	url, stderr := waitServing(t, lines, code)
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), "serve said: %s", strings.Join(stderr, "\n"))
	require.Contains(t, stderr[len(stderr)-1], "bearer token required")

	resp, err := http.Get(url + "/healthz")
	require.NoError(t, err)
	var h server.Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	assert.Equal(t, "ok", h.Status)
	assert.Equal(t, cli.Version, h.Version)
	assert.Positive(t, h.Plugins)

	msgs := []abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "fix the refund bug"}}}}
	for i := 0; i < 12; i++ {
		msgs = append(msgs,
			abi.Message{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: strings.Repeat(fmt.Sprintf("step %d of the investigation. ", i), 200)}}},
			abi.Message{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: fmt.Sprintf("go on with step %d", i+1)}}})
	}
	session, _ := json.Marshal(msgs)
	body, _ := json.Marshal(server.CompactRequest{Session: session})
	post := func(token string) *http.Response {
		req, _ := http.NewRequest("POST", url+"/v1/compact", bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	unauth := post("")
	unauth.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, unauth.StatusCode, "without the token")
	resp = post("t0ken")
	var got server.CompactResponse
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "compacted", got.Report.Action)
	assert.Equal(t, 20000, got.Report.ContextWindow)
	assert.Equal(t, "chars/4", got.Report.Tokenizer)

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case c := <-code:
		for line := range lines {
			stderr = append(stderr, line)
		}
		assert.Equal(t, cli.ExitOK, c, "after SIGINT")
		assert.Contains(t, strings.Join(stderr, "\n"), "stopped")
	case <-time.After(time.Minute):
		require.FailNow(t, "serve did not stop on SIGINT")
	}
	_, err = http.Get(url + "/healthz")
	assert.Error(t, err, "still answering after the shutdown")
}

// waitServing reads serve's stderr until it says where it serves, and
// returns its URL and the lines so far.
func waitServing(t *testing.T, lines <-chan string, code <-chan int) (string, []string) {
	t.Helper()
	var url string
	var stderr []string
	timeout := time.After(2 * time.Minute) // a hang guard
	for url == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				require.FailNow(t, "serve ended before listening", "exit %d:\n%s", <-code, strings.Join(stderr, "\n"))
			}
			stderr = append(stderr, line)
			if _, rest, found := strings.Cut(line, "serving on "); found {
				url, _, _ = strings.Cut(rest, " ")
			}
		case <-timeout:
			require.FailNow(t, "serve did not listen", strings.Join(stderr, "\n"))
		}
	}
	return url, stderr
}

// serveChildEnv, set in its environment, makes the test binary run
// `compact-host` with its arguments instead of the tests: a server in a
// process of its own, whose exit shows what it leaves behind.
const serveChildEnv = "COMPACT_HOST_TEST_RUN_CLI"

func init() {
	if os.Getenv(serveChildEnv) == "1" {
		os.Exit(cli.Main(os.Args[1:], cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Getenv: os.Getenv}))
	}
}

// serveChild runs `compact-host serve` on a free loopback port in a
// process of its own, with pluginsDir as its plugins directory, and
// returns the process, the URL it serves on and the channel its exit
// comes on. The test's end kills it if it still runs.
func serveChild(t *testing.T, pluginsDir string, env []string, args ...string) (*exec.Cmd, string, <-chan error) {
	t.Helper()
	cmd, url, _, exited := serveChildSaying(t, pluginsDir, env, args...)
	return cmd, url, exited
}

// serveChildSaying is serveChild that also returns what serve wrote
// before it served.
func serveChildSaying(t *testing.T, pluginsDir string, env []string, args ...string) (*exec.Cmd, string, []string, <-chan error) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	toml := fmt.Sprintf("cache_dir = %q\nplugins_dir = %q\n", server.CLICacheDir(), pluginsDir)
	require.NoError(t, os.WriteFile(cfg, []byte(toml), 0o644))
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--config", cfg, "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(append(os.Environ(), serveChildEnv+"=1"), env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads them any more
			}
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	noCode := make(chan int)
	close(noCode)
	url, said := waitServing(t, lines, noCode)
	return cmd, url, said, exited
}

// A process plugin dropped into the watched directory that hangs before
// its handshake is killed when serve stops on SIGTERM: serve used to exit
// and leave it running.
func TestServeStopReapsAPluginHangingAtItsHandshake(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGTERM")
	}
	bin := filepath.Join(t.TempDir(), "nohandshake")
	out, err := exec.Command("go", "build", "-o", bin, "../../host/plugin/testdata/nohandshake").CombinedOutput()
	require.NoError(t, err, "%s", out)
	plugins := t.TempDir()
	cmd, _, exited := serveChild(t, plugins, nil, "--provider", "none")

	pidFile := filepath.Join(t.TempDir(), "pid")
	m, err := json.Marshal(map[string]any{"command": bin, "args": []string{pidFile}})
	require.NoError(t, err)
	tmp := filepath.Join(plugins, ".hang.tmp")
	require.NoError(t, os.WriteFile(tmp, m, 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(plugins, "hang.plugin.json")))
	pid := proctest.ReadPID(t, pidFile, time.Minute)
	t.Cleanup(func() {
		if t.Failed() {
			syscall.Kill(pid, syscall.SIGKILL) // left behind: a failed test does not leave it too
		}
	})

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		assert.NoError(t, err, "serve's exit after SIGTERM")
	case <-time.After(time.Minute): // a hang guard
		require.FailNow(t, "serve did not stop on SIGTERM")
	}
	proctest.RequireGone(t, pid, time.Minute)
}

func TestServeRefusesAMissingToken(t *testing.T) {
	lines, code := serveCLI(t, nil, "--addr", "127.0.0.1:0", "--token-env", "NOT_SET")
	var stderr []string
	for line := range lines {
		stderr = append(stderr, line)
	}
	assert.Equal(t, cli.ExitUsage, <-code)
	assert.Contains(t, strings.Join(stderr, "\n"), "NOT_SET")
}

// serve --token-file: each token a tenant, reaching its own sessions
// only; --token-env still works beside it.
func TestServeTokenFileTenants(t *testing.T) {
	dir := t.TempDir()
	const alpha, beta, envToken = "alpha-secret-0123456789", "beta-secret-9876543210", "env-secret-5555555555"
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("# the teams\nalpha:"+alpha+"\n\n"+beta+"\n"), 0o600))
	secret := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600))
	_, url, _ := serveChild(t, t.TempDir(), []string{"SERVE_TEST_TOKEN=" + envToken},
		"--provider", "none", "--token-file", tokens, "--tenant-secret-file", secret, "--token-env", "SERVE_TEST_TOKEN",
		"--store", filepath.Join(dir, "store"))
	do := func(token, method, path, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	put := `{"session": [{"role":"user","content":[{"type":"text","text":"hi"}]}]}`
	assert.Equal(t, http.StatusCreated, do(alpha, "PUT", "/v1/sessions/s1", put))
	assert.Equal(t, http.StatusOK, do(alpha, "GET", "/v1/sessions/s1", ""))
	assert.Equal(t, http.StatusNotFound, do(beta, "GET", "/v1/sessions/s1", ""), "another tenant's session")
	assert.Equal(t, http.StatusNotFound, do(envToken, "GET", "/v1/sessions/s1", ""), "the --token-env tenant's")
	assert.Equal(t, http.StatusCreated, do(envToken, "PUT", "/v1/sessions/s1", put))
	assert.Equal(t, http.StatusUnauthorized, do("", "GET", "/v1/sessions/s1", ""))
	assert.Equal(t, http.StatusUnauthorized, do(alpha+"x", "GET", "/v1/sessions/s1", ""))
}

// A token file that does not read is refused at start, with the file and
// the line named and no token shown.
func TestServeRefusesABadTokenFile(t *testing.T) {
	const secret = "the-secret-0123456789"
	for _, tc := range []struct{ name, content, want string }{
		{"no token after the name", "alpha:\n", "line 1: no token after the name"},
		{"a token twice", secret + "\nbeta:" + secret + "\n", "line 2 repeats the token of line 1"},
		{"a name twice", "a:" + secret + "\na:" + secret + "y\n", "line 2 repeats the name of line 1"},
		{"a bad name", "a b:" + secret + "\n", "line 1: the name before ':'"},
		{"no token at all", "# nothing\n\n", "no token in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			lines, code := serveCLI(t, nil, "--addr", "127.0.0.1:0", "--token-file", path)
			var stderr []string
			for line := range lines {
				stderr = append(stderr, line)
			}
			assert.Equal(t, cli.ExitInput, <-code)
			out := strings.Join(stderr, "\n")
			assert.Contains(t, out, path)
			assert.Contains(t, out, tc.want)
			assert.NotContains(t, out, secret)
		})
	}
}

// Quota flags out of range are refused at start, naming the flag.
func TestServeRefusesQuotasOutOfRange(t *testing.T) {
	for _, args := range [][]string{
		{"--tenant-max-sessions", "50001"},
		{"--tenant-max-sessions", "-1"},
		{"--tenant-max-bytes", "-5"},
	} {
		lines, code := serveCLI(t, nil, append([]string{"--addr", "127.0.0.1:0"}, args...)...)
		var stderr []string
		for line := range lines {
			stderr = append(stderr, line)
		}
		assert.Equal(t, cli.ExitUsage, <-code, "%v", args)
		assert.Contains(t, strings.Join(stderr, "\n"), args[0])
	}
}

// Tokens that could together keep more sessions than the disk store does
// are warned about at start: past its cap the store removes the oldest,
// whoever made them.
func TestServeWarnsWhenTenantsOutgrowTheDiskStore(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("a:token-aaaaaaaaaaaa\nb:token-bbbbbbbbbbbb\nc:token-cccccccccccc\n"), 0o600))
	secret := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef"), 0o600))
	args := []string{"--provider", "none", "--token-file", tokens, "--tenant-secret-file", secret, "--tenant-max-sessions", "2"}
	_, _, said, _ := serveChildSaying(t, t.TempDir(), nil, append(args, "--store", "file://"+filepath.Join(dir, "small")+"?max_sessions=8")...)
	assert.Contains(t, strings.Join(said, "\n"), "3 tokens may keep 9 sessions (with their quota ledgers), over the 8 the disk store keeps")
	_, _, said, _ = serveChildSaying(t, t.TempDir(), nil, append(args, "--store", "file://"+filepath.Join(dir, "large")+"?max_sessions=9")...)
	assert.NotContains(t, strings.Join(said, "\n"), "may keep")
}
