package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/storetest"
	"github.com/compact-host/compact-host/internal/cli"
	"github.com/compact-host/compact-host/internal/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveURL waits for serve to listen and returns its URL.
func serveURL(t *testing.T, lines <-chan string, code <-chan int) string {
	t.Helper()
	var stderr []string
	timeout := time.After(2 * time.Minute) // a hang guard
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				require.FailNow(t, "serve ended before listening", "exit %d:\n%s", <-code, strings.Join(stderr, "\n"))
			}
			stderr = append(stderr, line)
			if _, rest, found := strings.Cut(line, "serving on "); found {
				url, _, _ := strings.Cut(rest, " ")
				return url
			}
		case <-timeout:
			require.FailNow(t, "serve did not listen", strings.Join(stderr, "\n"))
		}
	}
}

// stopServe interrupts serve as a terminal would and waits for it.
func stopServe(t *testing.T, lines <-chan string, code <-chan int) {
	t.Helper()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case c := <-code:
		for range lines {
		}
		assert.Equal(t, cli.ExitOK, c, "after SIGINT")
	case <-time.After(time.Minute):
		require.FailNow(t, "serve did not stop on SIGINT")
	}
}

func request(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out bytes.Buffer
	_, err = out.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out.Bytes()
}

// A session made through one serve process is read back by the next
// one on the same store: the disk store named by the environment, and
// Redis named by the flag.
func TestServeKeepsSessionsInItsStore(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGINT to self")
	}
	r := storetest.StartRedis(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"disk via COMPACT_HOST_STORE", map[string]string{"COMPACT_HOST_STORE": t.TempDir()}, nil},
		{"redis via --store", nil, []string{"--store", r.URL()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--addr", "127.0.0.1:0", "--provider", "none", "--context-window", "20000",
				"--max-output-tokens", "2000", "--tokenizer", "chars"}, tc.args...)
			lines, code := serveCLI(t, tc.env, args...)
			url := serveURL(t, lines, code)
			status, body := request(t, http.MethodPut, url+"/v1/sessions/cli-1", map[string]any{
				"session": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": "fix the refund bug"}}}}})
			require.Equal(t, http.StatusCreated, status, "%s", body)
			status, body = request(t, http.MethodPost, url+"/v1/sessions/cli-1/messages", map[string]any{
				"messages": []map[string]any{{"role": "assistant", "content": []map[string]any{{"type": "text", "text": "on it"}}}}})
			require.Equal(t, http.StatusOK, status, "%s", body)
			stopServe(t, lines, code)

			lines, code = serveCLI(t, tc.env, args...)
			url = serveURL(t, lines, code)
			status, body = request(t, http.MethodGet, url+"/v1/sessions/cli-1?output_format=openai", nil)
			require.Equal(t, http.StatusOK, status, "%s", body)
			var v server.SessionView
			require.NoError(t, json.Unmarshal(body, &v))
			assert.Equal(t, int64(2), v.Revision)
			assert.JSONEq(t, `[{"role":"user","content":"fix the refund bug"},{"role":"assistant","content":"on it"}]`, string(v.Messages))
			stopServe(t, lines, code)
		})
	}
}

func TestServeRefusesAStoreItCannotReach(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	lines, code := serveCLI(t, nil, "--addr", "127.0.0.1:0", "--store", fmt.Sprintf("redis://:s3cret@%s/0", addr))
	var stderr []string
	for line := range lines {
		stderr = append(stderr, line)
	}
	assert.Equal(t, cli.ExitInput, <-code)
	out := strings.Join(stderr, "\n")
	assert.Contains(t, out, "--store")
	assert.Contains(t, out, addr)
	assert.NotContains(t, out, "s3cret", "the password is never printed")
	assert.Contains(t, out, store.ErrUnavailable.Error())
}
