package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testOutput is a shell output of n lines with a failure in the middle.
func testOutput(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i == n/2 {
			b.WriteString("--- FAIL: TestRefund (0.01s)\n")
			continue
		}
		fmt.Fprintf(&b, "=== RUN   TestCase%04d\n", i)
	}
	return b.String()
}

func TestTruncate(t *testing.T) {
	_, ts := start(t, nil)
	out := testOutput(4000)
	var got TruncateResponse
	call(t, ts, "POST", "/v1/truncate", TruncateRequest{Tool: "Bash", Content: out, MaxTokens: 500}).decode(t, &got)
	assert.Equal(t, "head-tail", got.Category)
	assert.True(t, got.Truncated)
	assert.Equal(t, len(out), got.BytesBefore)
	assert.Equal(t, len(got.Content), got.BytesAfter)
	assert.LessOrEqual(t, got.TokensAfter, 550, "a cap of 500")
	assert.Less(t, got.TokensAfter, got.TokensBefore)
	assert.True(t, strings.HasPrefix(got.Content, "=== RUN   TestCase0000"), "head-tail keeps the head")
	assert.Contains(t, got.Content, "TestCase3999", "head-tail keeps the tail")

	// The category can be named outright, and a short output is untouched.
	call(t, ts, "POST", "/v1/truncate", TruncateRequest{Category: "match-list", Content: "a.go:1: x\n"}).decode(t, &got)
	assert.False(t, got.Truncated, "a short output is untouched")
	assert.Equal(t, "a.go:1: x\n", got.Content)
	assert.Equal(t, "match-list", got.Category)
	call(t, ts, "POST", "/v1/truncate", TruncateRequest{Tool: "Grep", Content: "x"}).decode(t, &got)
	assert.Equal(t, "match-list", got.Category, "Grep's category")

	r := call(t, ts, "POST", "/v1/truncate", `{"content":"x","max_tokens":-3}`)
	r.wantError(t, 400, CodeBadRequest)
	r = call(t, ts, "POST", "/v1/truncate", `{"content":["x"]}`)
	e := r.wantError(t, 400, CodeBadRequest)
	assert.Contains(t, e.Message, "content")
}

func TestPluginsAndHealth(t *testing.T) {
	_, ts := start(t, nil)
	var list PluginsResponse
	call(t, ts, "GET", "/v1/plugins", nil).decode(t, &list)
	byName := map[string]PluginInfo{}
	for _, p := range list.Plugins {
		byName[p.Name] = p
	}
	p := byName["structured"]
	assert.Equal(t, "builtin", p.Source)
	assert.True(t, p.Loaded)
	assert.Regexp(t, `^v1\.[0-9]+$`, p.ABI, "the embedded plugin speaks ABI v1 (its minor is the SDK's it was built with)")
	assert.Contains(t, p.Kinds, "strategy")
	assert.NotEmpty(t, byName["truncate"].Categories, "truncate declares categories")
	var h Health
	call(t, ts, "GET", "/healthz", nil).decode(t, &h)
	assert.Equal(t, Health{Status: "ok", Version: "test", ABI: abiVersion, Plugins: len(list.Plugins)}, h)
}

// TestDroppedInPluginIsUsedWithoutRestart drops plugins into the watched
// directory of a running server: a truncator written in C, then a file
// that is no plugin at all.
func TestDroppedInPluginIsUsedWithoutRestart(t *testing.T) {
	logdedup, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "c-truncator", "logdedup.wasm"))
	require.NoError(t, err, "the example plugin is committed")
	dir := t.TempDir()
	reg, err := plugin.NewRegistry(context.Background(), plugin.Options{Wasm: wasm.Runtime, Builtins: wasm.Builtins, Process: process.Runtime, PluginsDir: dir, CacheDir: cacheDir, WatchDebounce: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })
	_, ts := start(t, func(o *Options) { o.Registry = reg })

	logs := strings.Repeat("2026-01-02T10:00:00 retrying connection to db:5432\n", 2000)
	// No truncator handles "log" yet: the request is refused, naming the
	// categories there are.
	e := call(t, ts, "POST", "/v1/truncate", TruncateRequest{Category: "log", Content: logs, MaxTokens: 200}).wantError(t, 400, CodeUnknownCategory)
	assert.Contains(t, e.Message, `category "log": no truncator handles it; the categories are file-content, generic, head-tail, match-list`)

	drop(t, filepath.Join(dir, "logdedup.wasm"), logdedup)
	eventually(t, "the dropped-in truncator serves its category", func() error {
		r := call(t, ts, "POST", "/v1/truncate", TruncateRequest{Category: "log", Content: logs, MaxTokens: 200})
		if r.Status != 200 {
			return fmt.Errorf("status %d", r.Status)
		}
		var got TruncateResponse
		r.decode(t, &got)
		if !strings.Contains(got.Content, "similar lines") && !strings.Contains(got.Content, "repeats") {
			return errors.New("not the dropped-in truncator's cut")
		}
		return nil
	})

	drop(t, filepath.Join(dir, "broken.wasm"), []byte("not wasm"))
	eventually(t, "the broken plugin is reported", func() error {
		var h Health
		call(t, ts, "GET", "/healthz", nil).decode(t, &h)
		if h.Broken != 1 {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
	var list PluginsResponse
	call(t, ts, "GET", "/v1/plugins", nil).decode(t, &list)
	found := 0
	for _, p := range list.Plugins {
		switch p.Name {
		case "broken":
			assert.NotEmpty(t, p.Error, "broken says why")
			assert.False(t, p.Loaded)
			found++
		case "logdedup":
			assert.Equal(t, "wasm", p.Source)
			assert.True(t, p.Loaded)
			assert.Equal(t, "logdedup.wasm", p.Path, "the file by its name in the plugins directory")
			found++
		}
	}
	assert.Equal(t, 2, found, "%+v", list.Plugins)
	assert.Equal(t, filepath.Base(dir), list.Dir, "the directory by its name: the server's paths stay on the server")
}

// drop installs a file as an installer should: written aside, renamed in.
func drop(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	require.NoError(t, os.WriteFile(tmp, b, 0o644))
	require.NoError(t, os.Rename(tmp, path))
}
