package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/internal/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// dataKeys are the fields whose values are the user's data, not ours: a
// session in its own format, and maps keyed by record types or names.
var dataKeys = map[string]bool{"session": true, "skipped_records": true, "repaired": true, "input": true}

// nonSnake walks v (decoded into any) and returns the path of every key
// that is not snake_case.
func nonSnake(path string, v any) []string {
	var bad []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := path + "." + k
			if !snakeCase.MatchString(k) {
				bad = append(bad, p)
			}
			if !dataKeys[k] {
				bad = append(bad, nonSnake(p, x)...)
			}
		}
	case []any:
		for i, x := range v {
			bad = append(bad, nonSnake(fmt.Sprintf("%s[%d]", path, i), x)...)
		}
	}
	return bad
}

// assertSnake decodes every JSON document of out and checks its keys.
func assertSnake(t *testing.T, what, out string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	docs := 0
	for {
		var v any
		err := dec.Decode(&v)
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "%s: not JSON: %s", what, out)
		docs++
		assert.Empty(t, nonSnake(what, v), "%s: keys not in snake_case", what)
	}
	assert.Positive(t, docs, "%s printed no JSON", what)
}

// Every --json output of every command, and every answer of the API, has
// snake_case keys only.
func TestEveryJSONOutputIsSnakeCase(t *testing.T) {
	require.Equal(t, []string{"x.FirstKept"}, nonSnake("x", map[string]any{"FirstKept": 1, "first_kept": 2}), "the walker itself")
	require.Equal(t, []string{"x[0].plan.TokensKept"}, nonSnake("x", []any{map[string]any{"plan": map[string]any{"TokensKept": 1}}}))
	session := sampleSession(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	text := writeFile(t, "build.log", strings.Repeat("line of a build log\n", 2000))
	outputs := map[string][]string{
		"compact":           {"compact", "--json", "--context-window", "16000", "-o", out, session},
		"compact dry-run":   {"compact", "--dry-run", "--json", "--context-window", "16000", session},
		"compact root":      {"--json", "--context-window", "16000", "--threshold", "0.99", "-o", filepath.Join(dir, "none.jsonl"), session},
		"inspect":           {"inspect", "--json", "--context-window", "16000", session},
		"inspect compacted": {"inspect", "--json", "--context-window", "16000", out},
		"tokens":            {"tokens", "--json", session},
		"tokens text":       {"tokens", "--json", "--text", text},
		"truncate":          {"truncate", "--json", "--tool", "Bash", "--max-tokens", "200", text},
		"plugins list":      {"plugins", "list", "--json"},
		"plugins info":      {"plugins", "info", "--json", "structured"},
		"plugins verify":    {"plugins", "verify", "--json", "truncate"},
		"version":           {"version", "--json"},
		"eval":              {"eval", "--json", "--context-window", "16k", "--strategy", "truncate", "--in-process", session},
	}
	// compact first: inspect and undo read what it wrote.
	order := []string{"compact", "compact dry-run", "compact root", "inspect", "inspect compacted", "tokens", "tokens text",
		"truncate", "plugins list", "plugins info", "plugins verify", "version", "eval"}
	require.Len(t, order, len(outputs))
	for _, name := range order {
		r := runCLI(t, runOpts{}, outputs[name]...)
		require.Equal(t, ExitOK, r.code, "%s: %s", name, r.stderr)
		assertSnake(t, name, r.stdout)
	}
	r := runCLI(t, runOpts{}, "undo", "--json", out)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assertSnake(t, "undo", r.stdout)

	// With -o - the session takes stdout and the report goes to stderr.
	data, err := os.ReadFile(session)
	require.NoError(t, err)
	r = runCLI(t, runOpts{stdin: bytes.NewReader(data)}, "compact", "--json", "--context-window", "16000", "--output-format", "anthropic", "-o", "-")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var req map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &req), "stdout holds the session alone")
	assert.Contains(t, req, "messages")
	assertSnake(t, "compact -o - report", r.stderr[strings.Index(r.stderr, "{"):])

	// The API.
	reg, err := plugin.NewRegistry(context.Background(), plugin.Options{Wasm: wasm.Runtime, Builtins: wasm.Builtins, Process: process.Runtime, PluginsDir: filepath.Join(dir, "plugins"),
		CacheDir: filepath.Join(sharedCache(t), "wazero"), NoWatch: true})
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })
	srv, err := server.New(server.Options{Config: host.Config{ContextWindow: 16000, Tokenizer: "chars"}, Registry: reg,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	sess, err := json.Marshal(string(data))
	require.NoError(t, err)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/healthz", ""},
		{"GET", "/v1/plugins", ""},
		{"POST", "/v1/compact", `{"session":` + string(sess) + `}`},
		{"POST", "/v1/compact", `{"session":` + string(sess) + `,"options":{"dry_run":true}}`},
		{"POST", "/v1/check", `{"session":` + string(sess) + `}`},
		{"POST", "/v1/check", `{"session":` + string(sess) + `,"apply":true}`},
		{"POST", "/v1/truncate", `{"tool":"Bash","content":"a\nb\nc","max_tokens":100}`},
		{"POST", "/v1/compact", `{"session":` + string(sess) + `,"options":{"strategy":"nope"}}`},
		{"GET", "/v1/nowhere", ""},
	} {
		req, err := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assertSnake(t, c.method+" "+c.path, string(body))
	}
}
