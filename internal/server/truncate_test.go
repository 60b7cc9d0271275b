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
	if got.Category != "head-tail" || !got.Truncated || got.BytesBefore != len(out) || got.BytesAfter != len(got.Content) {
		t.Fatalf("category %q truncated %v bytes %d → %d", got.Category, got.Truncated, got.BytesBefore, got.BytesAfter)
	}
	if got.TokensAfter > 550 || got.TokensBefore <= got.TokensAfter {
		t.Fatalf("tokens %d → %d for a cap of 500", got.TokensBefore, got.TokensAfter)
	}
	if !strings.HasPrefix(got.Content, "=== RUN   TestCase0000") || !strings.Contains(got.Content, "TestCase3999") {
		t.Errorf("head-tail lost the head or the tail:\n%s", got.Content)
	}

	// The category can be named outright, and a short output is untouched.
	call(t, ts, "POST", "/v1/truncate", TruncateRequest{Category: "match-list", Content: "a.go:1: x\n"}).decode(t, &got)
	if got.Truncated || got.Content != "a.go:1: x\n" || got.Category != "match-list" {
		t.Fatalf("short output: %+v", got)
	}
	call(t, ts, "POST", "/v1/truncate", TruncateRequest{Tool: "Grep", Content: "x"}).decode(t, &got)
	if got.Category != "match-list" {
		t.Errorf("Grep maps to %q", got.Category)
	}

	r := call(t, ts, "POST", "/v1/truncate", `{"content":"x","max_tokens":-3}`)
	if e := r.err(t); r.Status != 400 || e.Code != CodeBadRequest {
		t.Fatalf("negative max_tokens: %d %+v", r.Status, e)
	}
	r = call(t, ts, "POST", "/v1/truncate", `{"content":["x"]}`)
	if e := r.err(t); r.Status != 400 || e.Code != CodeBadRequest || !strings.Contains(e.Message, "content") {
		t.Fatalf("content of the wrong type: %d %+v", r.Status, e)
	}
}

func TestPluginsAndHealth(t *testing.T) {
	_, ts := start(t, nil)
	var list PluginsResponse
	call(t, ts, "GET", "/v1/plugins", nil).decode(t, &list)
	byName := map[string]PluginInfo{}
	for _, p := range list.Plugins {
		byName[p.Name] = p
	}
	if p := byName["structured"]; p.Source != "builtin" || !p.Loaded || p.ABI != "v1.0" || !strings.Contains(strings.Join(p.Kinds, ","), "strategy") {
		t.Errorf("structured: %+v", p)
	}
	if p := byName["truncate"]; len(p.Categories) == 0 {
		t.Errorf("truncate declares no categories: %+v", p)
	}
	var h Health
	call(t, ts, "GET", "/healthz", nil).decode(t, &h)
	if h.Status != "ok" || h.Version != "test" || h.ABI != "v1.0" || h.Plugins != len(list.Plugins) || h.Broken != 0 {
		t.Fatalf("health %+v with %d plugins listed", h, len(list.Plugins))
	}
}

// TestDroppedInPluginIsUsedWithoutRestart drops plugins into the watched
// directory of a running server: a truncator written in C, then a file
// that is no plugin at all.
func TestDroppedInPluginIsUsedWithoutRestart(t *testing.T) {
	wasm, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "c-truncator", "logdedup.wasm"))
	if err != nil {
		t.Skipf("example plugin absent: %v", err)
	}
	dir := t.TempDir()
	reg, err := plugin.NewRegistry(context.Background(), plugin.Options{PluginsDir: dir, CacheDir: cacheDir, WatchDebounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	_, ts := start(t, func(o *Options) { o.Registry = reg })

	logs := strings.Repeat("2026-01-02T10:00:00 retrying connection to db:5432\n", 2000)
	var before TruncateResponse
	call(t, ts, "POST", "/v1/truncate", TruncateRequest{Category: "log", Content: logs, MaxTokens: 200}).decode(t, &before)

	drop(t, filepath.Join(dir, "logdedup.wasm"), wasm)
	eventually(t, "the dropped-in truncator serves its category", func() error {
		var got TruncateResponse
		call(t, ts, "POST", "/v1/truncate", TruncateRequest{Category: "log", Content: logs, MaxTokens: 200}).decode(t, &got)
		if got.Content == before.Content || !strings.Contains(got.Content, "similar lines") && !strings.Contains(got.Content, "repeats") {
			return errors.New("still the fallback's cut")
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
			if p.Error == "" || p.Loaded {
				t.Errorf("broken: %+v", p)
			}
			found++
		case "logdedup":
			if p.Source != "wasm" || !p.Loaded || p.Path != filepath.Join(dir, "logdedup.wasm") {
				t.Errorf("logdedup: %+v", p)
			}
			found++
		}
	}
	if found != 2 || list.Dir != dir {
		t.Fatalf("plugins of %s: %+v", list.Dir, list.Plugins)
	}
}

// drop installs a file as an installer should: written aside, renamed in.
func drop(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
