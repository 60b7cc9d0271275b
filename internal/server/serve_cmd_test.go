package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/internal/cli"
	"github.com/compact-host/compact-host/internal/server"
)

// serveCLI runs `compact-host serve` with args and the environment env,
// and returns its stderr lines as they come and its exit code when it
// ends.
func serveCLI(t *testing.T, env map[string]string, args ...string) (<-chan string, <-chan int) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	toml := fmt.Sprintf("cache_dir = %q\nplugins_dir = %q\n", server.CLICacheDir(), t.TempDir())
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
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
	var url string
	var stderr []string
	timeout := time.After(2 * time.Minute) // a hang guard
	for url == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("serve ended with %d before listening:\n%s", <-code, strings.Join(stderr, "\n"))
			}
			stderr = append(stderr, line)
			if _, rest, found := strings.Cut(line, "serving on "); found {
				url, _, _ = strings.Cut(rest, " ")
			}
		case <-timeout:
			t.Fatalf("serve did not listen:\n%s", strings.Join(stderr, "\n"))
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.Contains(stderr[len(stderr)-1], "bearer token required") {
		t.Fatalf("serve said: %s", strings.Join(stderr, "\n"))
	}

	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h server.Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if h.Status != "ok" || h.Version != cli.Version || h.Plugins == 0 {
		t.Fatalf("health %+v", h)
	}

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
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := post(""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", resp.StatusCode)
	}
	resp = post("t0ken")
	var got server.CompactResponse
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if resp.StatusCode != 200 || got.Report.Action != "compacted" || got.Report.ContextWindow != 20000 || got.Report.Tokenizer != "chars/4" {
		t.Fatalf("compact: %d %+v", resp.StatusCode, got.Report)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		for line := range lines {
			stderr = append(stderr, line)
		}
		if c != cli.ExitOK || !strings.Contains(strings.Join(stderr, "\n"), "stopped") {
			t.Fatalf("exit %d after SIGINT:\n%s", c, strings.Join(stderr, "\n"))
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop on SIGINT")
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Fatal("still answering after the shutdown")
	}
}

func TestServeRefusesAMissingToken(t *testing.T) {
	lines, code := serveCLI(t, nil, "--addr", "127.0.0.1:0", "--token-env", "NOT_SET")
	var stderr []string
	for line := range lines {
		stderr = append(stderr, line)
	}
	if c := <-code; c != cli.ExitUsage || !strings.Contains(strings.Join(stderr, "\n"), "NOT_SET") {
		t.Fatalf("exit %d:\n%s", c, strings.Join(stderr, "\n"))
	}
}
