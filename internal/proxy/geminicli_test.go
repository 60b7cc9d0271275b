package proxy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGeminiCLIThroughProxy runs the Gemini CLI (testdata/geminicli,
// installed by .ci/run) non-interactively with GOOGLE_GEMINI_BASE_URL on
// the proxy, as the README says, against the loopback Gemini upstream.
func TestGeminiCLIThroughProxy(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "geminicli"))
	require.NoError(t, err)
	gemini := filepath.Join(dir, "node_modules", ".bin", "gemini")
	if _, err := os.Stat(gemini); err != nil {
		why := "the Gemini CLI is not installed: run (cd internal/proxy/testdata/geminicli && npm ci --no-audit --no-fund)"
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", why)
		}
		t.Skip(why)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	r, up := newGeminiRig(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard
	defer cancel()
	work, home := t.TempDir(), t.TempDir()
	// With GOOGLE_GEMINI_BASE_URL set and no auth type chosen, the CLI
	// picks its "gateway" auth, which it refuses without a terminal
	// ("Invalid auth method selected."): the settings choose the API key.
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".gemini"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gemini", "settings.json"),
		[]byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`), 0o600))
	cmd := exec.CommandContext(ctx, node, gemini, "-p", "Say hello.", "--model", geminiAgentModel)
	cmd.Dir = work
	// Only what the CLI needs: a home of its own, the proxy as its base
	// URL, a key; nothing of the machine's.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=dumb", "CI=true",
		"GOOGLE_GEMINI_BASE_URL=" + r.srv.URL, "GEMINI_API_KEY=" + geminiTestKey,
		"GEMINI_CLI_NO_RELAUNCH=true", "NO_BROWSER=true", "GEMINI_CLI_TRUST_WORKSPACE=true"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	agent, _ := up.records()
	require.NoError(t, err, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
	require.NotEmpty(t, agent, "no request reached the upstream; stderr: %s", stderr.String())
	assert.Contains(t, stdout.String(), "reply")
	var gated int
	for _, rec := range agent {
		assert.Equal(t, geminiTestKey, rec.Header.Get("X-Goog-Api-Key"), rec.Path)
		if _, ok := geminiModelOf(rec.Path); ok {
			gated++
		}
	}
	assert.Positive(t, gated)
	// The CLI's requests went through the gate, not around it.
	assert.Equal(t, float64(gated), metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="forwarded",kind="gemini"}`))
	for _, rec := range r.front.requests() {
		t.Logf("%s ?%s (%d bytes)", rec.Path, rec.Query, len(rec.Body))
	}
	assert.NotContains(t, r.logs.String(), geminiTestKey)
	assert.False(t, strings.Contains(stderr.String(), "ECONNREFUSED"), "stderr: %s", stderr.String())
}
