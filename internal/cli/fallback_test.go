package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusingProvider is a loopback server that refuses every request, as
// the Anthropic API refuses a key without access, and counts them.
func refusingProvider(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"permission_error","message":"this key may not use the model"}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// A strategy someone named that fails is an error of its own, exit 9,
// though a fallback wrote the result: the output is there, the report
// says which strategy failed, and --allow-fallback turns it back into
// exit 0. The default strategy falling back stays exit 0.
func TestNamedStrategyFailureExits9(t *testing.T) {
	srv, calls := refusingProvider(t)
	session := sampleSession(t)
	env := map[string]string{"ANTHROPIC_API_KEY": "test-key"}
	base := []string{"compact", "--provider", "anthropic", "--base-url", srv.URL, "--context-window", "16000", "--json"}
	compact := func(t *testing.T, config string, extra ...string) (result, map[string]any, string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out.jsonl")
		args := append([]string{"--config", config}, base...)
		args = append(append(args, extra...), "-o", out, session)
		r := runCLI(t, runOpts{env: env}, args...)
		var rep map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), "stdout: %s\nstderr: %s", r.stdout, r.stderr)
		return r, rep, out
	}
	noRetry := writeFile(t, "config.toml", "[provider]\nmax_retries = 0\n")

	t.Run("flag", func(t *testing.T) {
		before := calls.Load()
		r, rep, out := compact(t, noRetry, "--strategy", "structured")
		require.Equal(t, ExitStrategyFailed, r.code, "stderr: %s", r.stderr)
		assert.Greater(t, calls.Load(), before, "the strategy asked the provider")
		assert.Equal(t, true, rep["strategy_failed"])
		assert.Equal(t, "structured", rep["requested_strategy"])
		assert.NotEqual(t, "structured", rep["strategy"])
		assert.NotEmpty(t, rep["fallbacks"])
		st, err := os.Stat(out)
		require.NoError(t, err, "the fallback's result is written")
		assert.Positive(t, st.Size())
		assert.Equal(t, out, rep["output"])
		lines := jsonLines(t, r.stderr)
		require.NotEmpty(t, lines)
		last := lines[len(lines)-1]
		assert.Equal(t, "error", last.Level)
		assert.Contains(t, last.Message, "--strategy structured failed")
		assert.Contains(t, last.Message, "--allow-fallback")
	})

	t.Run("config", func(t *testing.T) {
		config := writeFile(t, "config.toml", "strategy = \"structured\"\n[provider]\nmax_retries = 0\n")
		r, rep, _ := compact(t, config)
		require.Equal(t, ExitStrategyFailed, r.code, "stderr: %s", r.stderr)
		assert.Equal(t, true, rep["strategy_failed"])
		assert.Contains(t, r.stderr, `strategy \"structured\" of the config failed`)
	})

	t.Run("allowed", func(t *testing.T) {
		r, rep, out := compact(t, noRetry, "--strategy", "structured", "--allow-fallback")
		require.Equal(t, ExitOK, r.code, "stderr: %s", r.stderr)
		assert.Equal(t, true, rep["strategy_failed"], "allowed, and still reported")
		assert.FileExists(t, out)
	})

	t.Run("default", func(t *testing.T) {
		r, rep, _ := compact(t, noRetry)
		require.Equal(t, ExitOK, r.code, "nobody chose the strategy: stderr: %s", r.stderr)
		assert.Equal(t, true, rep["strategy_failed"])
		assert.NotEmpty(t, rep["fallbacks"])
	})

	t.Run("offline strategy", func(t *testing.T) {
		r, rep, _ := compact(t, noRetry, "--strategy", "truncate")
		require.Equal(t, ExitOK, r.code, "truncate needs no model: stderr: %s", r.stderr)
		assert.Nil(t, rep["strategy_failed"])
		assert.Equal(t, "truncate", rep["strategy"])
	})
}
