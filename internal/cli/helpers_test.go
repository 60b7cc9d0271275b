package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/internal/testwasm"
)

// cacheDir is one compilation cache for the package's tests, so the
// built-in wasm plugins compile once.
var (
	cacheOnce sync.Once
	cacheDir  string
)

func sharedCache(t *testing.T) string {
	cacheOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cli-test-cache")
		require.NoError(t, err)
		// The CLI keeps compiled modules in cache_dir/wazero.
		_, err = testwasm.ShareCompiled(filepath.Join(dir, "wazero"))
		require.NoError(t, err)
		cacheDir = dir
	})
	return cacheDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cacheDir != "" {
		os.RemoveAll(cacheDir)
	}
	os.Exit(code)
}

// result is what one run of the command line left.
type result struct {
	code           int
	stdout, stderr string
}

// runOpts tune runCLI.
type runOpts struct {
	ctx      context.Context
	stdin    io.Reader
	env      map[string]string
	terminal bool
}

// runCLI runs the command line in process, with an environment holding
// only env, the shared cache and a config directory of the test's own.
func runCLI(t *testing.T, o runOpts, args ...string) result {
	t.Helper()
	if o.ctx == nil {
		o.ctx = context.Background()
	}
	if o.stdin == nil {
		o.stdin = bytes.NewReader(nil)
	}
	cache, home := sharedCache(t), t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Run(o.ctx, args, IO{In: o.stdin, Out: &stdout, Err: &stderr, ErrIsTerminal: o.terminal, Getenv: func(k string) string {
		switch k {
		case "COMPACT_HOST_CACHE_DIR":
			return cache
		case "COMPACT_HOST_PLUGINS_DIR":
			return filepath.Join(home, "plugins")
		case "XDG_CONFIG_HOME":
			return home
		}
		return o.env[k]
	}})
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// sampleSession copies the project's sample session into the test's own
// directory and returns its path.
func sampleSession(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "sessions", "bugfix.jsonl"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "bugfix.jsonl")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// writeFile writes data to name in a directory of the test's and returns
// the path.
func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	return path
}

// jsonLines decodes stderr of a --json run, which must be JSON lines
// only: notes, warnings, progress lines, the error, and log records
// (whose message is in "msg", so it is empty here).
func jsonLines(t *testing.T, stderr string) []stderrLine {
	t.Helper()
	var out []stderrLine
	for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if line == "" {
			continue
		}
		var l stderrLine
		require.NoError(t, json.Unmarshal([]byte(line), &l), "stderr line is not JSON: %s", line)
		out = append(out, l)
	}
	return out
}
