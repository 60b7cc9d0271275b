package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hungProvider is a loopback server that takes Anthropic Messages
// requests and never answers: it holds each until the client gives up or
// the test ends. It counts the requests it got.
func hungProvider(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	release := make(chan struct{})
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/messages" {
			calls.Add(1)
		}
		select {
		case <-r.Context().Done():
		case <-release:
		case <-time.After(time.Minute): // a bound even if the client never gives up
		}
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return srv, &calls
}

// A provider that never answers costs the configured timeout per
// attempt, not minutes: the strategies that need it fail with a timeout
// error, the compaction falls back to one that does not, and the report
// says so, with the model calls made.
func TestHungProviderTimesOutAndTheFallbackIsReported(t *testing.T) {
	srv, calls := hungProvider(t)
	session := sampleSession(t)
	config := writeFile(t, "config.toml", "[provider]\nmax_retries = 0\n")
	out := filepath.Join(t.TempDir(), "out.jsonl")
	began := time.Now()
	r := runCLI(t, runOpts{env: map[string]string{"ANTHROPIC_API_KEY": "test-key"}},
		"--config", config, "compact", "--provider", "anthropic", "--base-url", srv.URL, "--provider-timeout", "300ms",
		"--context-window", "16000", "--json", "-o", out, session)
	require.Equal(t, ExitOK, r.code, "stderr: %s", r.stderr)
	// A generous bound: the default would be minutes.
	assert.Less(t, time.Since(began), 90*time.Second)

	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.Equal(t, "structured", rep["requested_strategy"])
	assert.NotEqual(t, "structured", rep["strategy"], "the strategy that wrote the summary is the fallback")
	fallbacks, _ := rep["fallbacks"].([]any)
	require.NotEmpty(t, fallbacks, "a fallback is never silent: %s", r.stdout)
	assert.Contains(t, fallbacks[0], "structured →")
	assert.Contains(t, fallbacks[0], "no complete response within 300ms")
	assert.GreaterOrEqual(t, rep["model_calls"], float64(1))
	assert.Equal(t, rep["model_calls"], rep["model_calls_failed"])
	assert.Equal(t, float64(calls.Load()), rep["model_calls"], "every call the provider saw is counted")
	// With --json, stderr is JSON lines too: the warning is one of them.
	assert.Contains(t, jsonLines(t, r.stderr), stderrLine{Level: "warning", Message: "fallback " + fallbacks[0].(string)})
}

// The text report names the fallback and the model calls, and progress on
// a terminal shows the step, the time and each retry.
func TestHungProviderProgressAndTextReport(t *testing.T) {
	srv, _ := hungProvider(t)
	session := sampleSession(t)
	config := writeFile(t, "config.toml", "[provider]\nmax_retries = 1\n")
	out := filepath.Join(t.TempDir(), "out.jsonl")
	r := runCLI(t, runOpts{terminal: true, env: map[string]string{"ANTHROPIC_API_KEY": "test-key"}},
		"--config", config, "--provider", "anthropic", "--base-url", srv.URL, "--provider-timeout", "200ms",
		"--context-window", "16000", "--strategy", "structured", "--summary-tokens", "1000", "-o", out, session)
	// The strategy was named, so its failure is exit 9; the report and
	// the output are there all the same.
	require.Equal(t, ExitStrategyFailed, r.code, "stderr: %s", r.stderr)
	assert.FileExists(t, out)
	assert.Regexp(t, `\[ *\d+\.\ds\] compacting .* with structured`, r.stderr)
	assert.Regexp(t, `\[ *\d+\.\ds\] structured: model call 1 to `, r.stderr)
	assert.Contains(t, r.stderr, "structured: model call attempt 1 of 2 failed")
	assert.Contains(t, r.stderr, "structured failed")
	assert.Regexp(t, `(?m)^compacted with \w+, .*\(fallback: structured failed\)`, r.stdout)
	assert.Regexp(t, `(?m)^fallback: structured → `, r.stdout)
	assert.Regexp(t, `(?m)^model: \d+ calls, \d+ failed;`, r.stdout)
}

// An OpenAI-compatible server has no default model: the error names the
// flag to set, before any call.
func TestCompatibleServerNeedsACompactionModel(t *testing.T) {
	session := sampleSession(t)
	r := runCLI(t, runOpts{}, "compact", "--provider", "openai", "--base-url", "http://127.0.0.1:9/v1",
		"--context-window", "16000", "-o", filepath.Join(t.TempDir(), "o.jsonl"), session)
	assert.Equal(t, ExitUsage, r.code)
	assert.Contains(t, r.stderr, "needs a model for summaries: set --compaction-model")
	assert.NotContains(t, r.stderr, "Config.")
}

// A read that waits on a pipe stops when the command is interrupted.
func TestInterruptStopsABlockedRead(t *testing.T) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Part of a session, then nothing: the reader waits.
		_, _ = pw.Write([]byte(`{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}]}` + "\n"))
		cancel()
	}()
	done := make(chan result, 1)
	go func() { done <- runCLI(t, runOpts{ctx: ctx, stdin: pr}, "inspect", "--context-window", "16000", "-") }()
	select {
	case r := <-done:
		assert.Equal(t, ExitInterrupted, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stderr, "interrupted")
	case <-time.After(time.Minute):
		t.Fatal("the read did not stop when interrupted")
	}
}

// Input over the limit is refused, from a file or stdin, naming the flag
// and the key that raise it.
func TestInputLimit(t *testing.T) {
	session := sampleSession(t)
	r := runCLI(t, runOpts{}, "inspect", "--max-input-bytes", "1000", "--context-window", "16000", session)
	assert.Equal(t, ExitInput, r.code)
	assert.Contains(t, r.stderr, "over the 1000 bytes limit")
	assert.Contains(t, r.stderr, "--max-input-bytes")

	r = runCLI(t, runOpts{stdin: strings.NewReader(strings.Repeat("x", 5000))}, "tokens", "--text", "--max-input-bytes", "4096")
	assert.Equal(t, ExitInput, r.code)
	assert.Contains(t, r.stderr, "stdin: the input is over the 4 KiB limit")
}
