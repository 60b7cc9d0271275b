package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/internal/mcptest"
)

// mcpClient runs `compact-host mcp ARGS` in process over a pipe and
// connects an MCP client to it.
func mcpClient(t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	return mcpClientEnv(t, nil, args...)
}

// mcpClientEnv is mcpClient with the environment variables env.
func mcpClientEnv(t *testing.T, env map[string]string, args ...string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan result, 1)
	cache := sharedCache(t)
	go func() {
		var stderr strings.Builder
		code := Run(ctx, append([]string{"mcp"}, args...), IO{In: inR, Out: outW, Err: &stderr, Getenv: func(k string) string {
			if k == "COMPACT_HOST_CACHE_DIR" {
				return cache
			}
			return env[k]
		}})
		outW.Close()
		done <- result{code: code, stderr: stderr.String()}
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		select {
		case r := <-done:
			assert.Equal(t, 0, r.code, "mcp exited with %d: %s", r.code, r.stderr)
		case <-time.After(30 * time.Second):
			t.Error("mcp did not stop when its input closed")
		}
		cancel()
	})
	return cs
}

// The markers compact --in-place writes into an agent's file resolve
// through `compact-host mcp --session-file`, after a second compaction
// merged the first summary too, and in a Codex rollout the agent had
// already compacted itself.
func TestMCPRecallsWhatCompactInPlaceFolded(t *testing.T) {
	corpus := corpusDir(t)
	for _, name := range []string{"claude-code-go-cli.jsonl", "codex-typescript.jsonl"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(corpus, name))
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), name)
			require.NoError(t, os.WriteFile(path, data, 0o644))
			r := runCLI(t, runOpts{}, "compact", "--in-place", "--context-window", "100k", path)
			require.Contains(t, []int{0, ExitNotFit}, r.code, r.stderr)
			after1, err := os.ReadFile(path)
			require.NoError(t, err)
			first := abi.MarkersIn(string(after1[len(data):]))
			require.NotEmpty(t, first, "the compaction wrote no marker")
			// At half the first window the second run folds the first summary
			// and messages kept after it (at 64k then 32k, the go-cli file keeps
			// one long turn whose head is the summary alone).
			r = runCLI(t, runOpts{}, "compact", "--in-place", "--context-window", "48k", path)
			require.Contains(t, []int{0, ExitNotFit}, r.code, r.stderr)
			after2, err := os.ReadFile(path)
			require.NoError(t, err)
			second := abi.MarkersIn(string(after2[len(after1):]))
			require.NotEmpty(t, second, "the second compaction wrote no marker")
			for _, ref := range first {
				assert.Contains(t, second, ref, "the second summary lost a marker of the first")
			}

			cs := mcpClient(t, "--session-file", path)
			tools, err := cs.ListTools(context.Background(), nil)
			require.NoError(t, err)
			require.Len(t, tools.Tools, 2)
			spans, outputs := 0, 0
			for _, ref := range second {
				text, isErr := mcptest.Call(t, cs, "recall", map[string]any{"ref": ref})
				require.False(t, isErr, "recall %s: %s", ref, text)
				require.True(t, strings.HasPrefix(text, "[recall:"+ref+"] page 1 of "), text)
				if ref[0] == 't' {
					outputs++
					assert.Contains(t, text, "[tool output ")
				} else {
					spans++
					assert.Contains(t, text, "--- user")
				}
			}
			assert.Positive(t, spans)
			assert.Positive(t, outputs)

			text, isErr := mcptest.Call(t, cs, "recall", map[string]any{"ref": "t-0123456789abcdef"})
			assert.True(t, isErr)
			assert.Contains(t, text, "no such marker in this conversation")
			text, isErr = mcptest.Call(t, cs, "recall", map[string]any{"ref": "../../../etc/passwd"})
			assert.True(t, isErr)
			assert.Contains(t, text, "not a marker reference")
			assert.NotContains(t, text, path)
			text, isErr = mcptest.Call(t, cs, "search", map[string]any{"query": strings.Repeat("q", 2000)})
			assert.True(t, isErr)
			assert.Contains(t, text, "over the limit")
		})
	}
}

func TestMCPRefusesWhatItCannotServe(t *testing.T) {
	r := runCLI(t, runOpts{}, "mcp")
	assert.Equal(t, ExitUsage, r.code)
	assert.Contains(t, r.stderr, "--session-file")
	r = runCLI(t, runOpts{}, "mcp", "--session-file", filepath.Join(t.TempDir(), "missing.jsonl"))
	assert.Equal(t, ExitInput, r.code, r.stderr)
	r = runCLI(t, runOpts{}, "mcp", "--session-file", writeFile(t, "x.jsonl", "not a session\n"))
	assert.Equal(t, ExitInput, r.code, r.stderr)
	r = runCLI(t, runOpts{}, "mcp", "--session-file", sampleSession(t), "--listen", "0.0.0.0:0")
	assert.Equal(t, ExitUsage, r.code)
	assert.Contains(t, r.stderr, "--token-file")
	r = runCLI(t, runOpts{}, "mcp", "--session-file", sampleSession(t), "--token-file", "x")
	assert.Equal(t, ExitUsage, r.code)
}
