package cli_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/compact-host/compact-host/internal/cli"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProxyCommandUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--upstream is required"},
		{[]string{"--upstream", "ftp://x"}, "--upstream"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--kind", "vertex"}, "--kind \"vertex\": want auto, anthropic, openai or gemini"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--metrics-token-env", "NO_SUCH_TOKEN_VAR"}, "--metrics-token-env NO_SUCH_TOKEN_VAR: the variable is unset or empty"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--body-idle-timeout", "0s"}, "--body-idle-timeout must be positive"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--max-body-reads", "0"}, "--max-body-reads must be positive"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--websockets", "tunnel"}, "want relay, refuse or forward (flag --websockets)"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--policy", "cheapest"}, "--policy \"cheapest\": want threshold or cache-aware"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--policy", "cache-aware", "--cold-share", "1.5"}, "--cold-share 1.5"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--cache-ttl", "0s"}, "--cache-ttl must be positive"},
	} {
		var stderr bytes.Buffer
		code := cli.Main(append([]string{"proxy"}, tc.args...), cli.IO{In: strings.NewReader(""), Out: io.Discard, Err: &stderr,
			Getenv: func(string) string { return "" }})
		assert.Equal(t, cli.ExitUsage, code, "%v: %s", tc.args, stderr.String())
		assert.Contains(t, stderr.String(), tc.want)
	}
}

func TestProxyCommandRefusesABadTenantSecret(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("tiny\n"), 0o600))
	for _, path := range []string{filepath.Join(dir, "missing"), short} {
		var stderr bytes.Buffer
		code := cli.Main([]string{"proxy", "--upstream", "http://127.0.0.1:1", "--tenant-secret-file", path},
			cli.IO{In: strings.NewReader(""), Out: io.Discard, Err: &stderr, Getenv: func(string) string { return "" }})
		assert.Equal(t, cli.ExitInput, code, stderr.String())
		assert.Contains(t, stderr.String(), "--tenant-secret-file")
		assert.Contains(t, stderr.String(), path)
	}
}

func TestProxyCommandRefusesAStoreItCannotOpen(t *testing.T) {
	var stderr bytes.Buffer
	code := cli.Main([]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "ftp://somewhere/x"},
		cli.IO{In: strings.NewReader(""), Out: io.Discard, Err: &stderr, Getenv: func(string) string { return "" }})
	assert.Equal(t, cli.ExitInput, code, stderr.String())
	assert.Contains(t, stderr.String(), `--store "ftp://somewhere/x"`)
	assert.Contains(t, stderr.String(), "redis://", "the error lists the forms a store takes")
}

// TestProxyCommand runs the real command on a loopback port in front of a
// loopback upstream, sends a request through it, and stops it with SIGINT.
func TestProxyCommand(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGINT to self")
	}
	const metricsToken = "metrics-token-for-the-test"
	var mu sync.Mutex
	var got []byte
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = body
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}`)
	}))
	defer up.Close()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("cache_dir = %q\nplugins_dir = %q\n", t.TempDir(), t.TempDir())), 0o644))

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
		code <- cli.Main([]string{"proxy", "--config", cfg, "--listen", "127.0.0.1:0", "--upstream", up.URL, "--offline",
			"--metrics-token-env", "TEST_METRICS_TOKEN", "--websockets", "refuse"},
			cli.IO{In: strings.NewReader(""), Out: io.Discard, Err: pw, Getenv: func(name string) string {
				if name == "TEST_METRICS_TOKEN" {
					return metricsToken
				}
				return ""
			}})
	}()
	var addr string
	var stderr []string
	timeout := time.After(2 * time.Minute) // a hang guard
	for addr == "" {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "proxy ended before listening:\n%s", strings.Join(stderr, "\n"))
			stderr = append(stderr, line)
			if _, rest, found := strings.Cut(line, "proxying "); found {
				addr, _, _ = strings.Cut(rest, " ")
			}
		case <-timeout:
			t.Fatalf("proxy did not listen:\n%s", strings.Join(stderr, "\n"))
		}
	}
	body := `{"model":"claude-sonnet-4-5",  "max_tokens":100,"messages":[{"role":"user","content":"hello"}],"x_unknown":[1]}`
	req, _ := http.NewRequest(http.MethodPost, addr+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", "sk-ant-cmd-test-key")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(answer), `"text":"hi"`)
	mu.Lock()
	assert.Equal(t, body, string(got), "forwarded byte for byte")
	mu.Unlock()

	resp, err = http.Get(addr + "/_compact-host/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the metrics need the token")
	req, _ = http.NewRequest(http.MethodGet, addr+"/_compact-host/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+metricsToken)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(metrics), `compact_host_proxy_requests_total{action="forwarded",kind="anthropic"} 1`)

	// With --websockets refuse, Codex's Responses WebSocket is answered
	// 426, so that Codex sends its turns over HTTP.
	req, _ = http.NewRequest(http.MethodGet, addr+"/v1/responses", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUpgradeRequired, resp.StatusCode)

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case c := <-code:
		for line := range lines {
			stderr = append(stderr, line)
		}
		assert.Equal(t, cli.ExitOK, c, strings.Join(stderr, "\n"))
		assert.Contains(t, strings.Join(stderr, "\n"), "stopped")
		assert.NotContains(t, strings.Join(stderr, "\n"), "sk-ant-cmd-test-key")
	case <-time.After(time.Minute):
		t.Fatal("proxy did not stop on SIGINT")
	}
}
