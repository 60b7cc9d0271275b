package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host/formats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nodeClient finds node and the SDKs under testdata/node, installed by
// .ci/run. Locally their absence skips; in CI it fails.
func nodeClient(t *testing.T) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "node"))
	require.NoError(t, err)
	node, lookErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "@anthropic-ai", "sdk", "package.json"))
	_, oaErr := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json"))
	_, genaiErr := os.Stat(filepath.Join(dir, "node_modules", "@google", "genai", "package.json"))
	if lookErr != nil || modErr != nil || oaErr != nil || genaiErr != nil {
		why := "node is not on PATH"
		if lookErr == nil {
			why = "the Node SDKs are not installed: run (cd internal/proxy/testdata/node && npm ci --no-audit --no-fund)"
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", why)
		}
		t.Skip(why)
	}
	return node, dir
}

func TestNodeSDKConversation(t *testing.T) {
	node, dir := nodeClient(t)
	for _, tc := range []struct {
		kind, format, model, key string
	}{
		{KindAnthropic, formats.Anthropic, summaryModel, testKey},
		{KindOpenAI, formats.OpenAI, "gpt-4.1-mini", "sk-proj-node-openai-SECRET-31337"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			r := newRig(t, func(o *Options) { o.CompactionModel = tc.model })
			const turns = 14
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "client.mjs")
			cmd.Dir = dir
			// Only what the script needs: no provider variables of the
			// machine reach the SDKs.
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
				"PROXY_URL=" + r.srv.URL, "KIND=" + tc.kind, "TURNS=" + strconv.Itoa(turns), "API_KEY=" + tc.key}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
			sc := bufio.NewScanner(&stdout)
			n := 0
			for sc.Scan() {
				var line struct {
					Turn int    `json:"turn"`
					Text string `json:"text"`
				}
				require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "%s", sc.Text())
				assert.Equal(t, n, line.Turn)
				assert.Equal(t, fmt.Sprintf("reply %d", n+1), line.Text)
				n++
			}
			require.Equal(t, turns, n, "stderr: %s", stderr.String())
			checkConversation(t, r, tc.format, tc.model, turns)
			for _, rec := range r.front.requests() {
				assert.Contains(t, string(rec.Body), `"x_future_field":{"keep":[1,2]}`, "the unknown field left the client")
			}
			assert.NotContains(t, r.logs.String(), tc.key)
		})
	}
}
