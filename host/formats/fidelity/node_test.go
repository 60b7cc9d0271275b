package fidelity_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/formats"
)

// TestNodeSDKRequests records the same conversations sent by the official
// Node SDKs (@anthropic-ai/sdk and openai, pinned by
// testdata/node/package-lock.json) and checks them as the Go SDKs' bodies
// are checked. It needs node and npm, and npm's registry or cache for
// "npm ci"; without them it is skipped.
func TestNodeSDKRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("installs npm packages; skipped in -short mode")
	}
	node, errNode := exec.LookPath("node")
	npm, errNPM := exec.LookPath("npm")
	if errNode != nil || errNPM != nil {
		t.Skip("node and npm are not installed")
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "record.mjs"} {
		data, err := os.ReadFile(filepath.Join("testdata", "node", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o644))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Skipf("npm ci could not install the Node SDKs (no registry or cache?): %v\n%s", err, out)
	}

	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	run := exec.CommandContext(ctx, node, "record.mjs")
	run.Dir = dir
	run.Env = append(os.Environ(), "ANTHROPIC_BASE_URL="+srv.URL, "OPENAI_BASE_URL="+srv.URL+"/v1", "ROUNDS=6")
	out, err := run.CombinedOutput()
	require.NoError(t, err, "node record.mjs:\n%s", out)

	rec.mu.Lock()
	bodies := append([][]byte(nil), rec.bodies...)
	rec.mu.Unlock()
	require.Len(t, bodies, 4, "anthropic plain and streaming, then openai plain and streaming")
	for i, name := range []string{"anthropic/plain", "anthropic/streaming", "openai/plain", "openai/streaming"} {
		body := bodies[i]
		t.Run(name, func(t *testing.T) {
			if i < 2 {
				checkByteForByte(t, body, formats.Anthropic)
				checkAnthropicCompaction(t, body)
			} else {
				checkByteForByte(t, body, formats.OpenAI)
				checkOpenAICompaction(t, body)
			}
		})
	}
}
