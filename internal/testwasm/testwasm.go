// Package testwasm gives the tests of every package one on-disk wazero
// compilation cache per machine, so each wasm module (a built-in plugin is
// about 5 MB of Go-compiled wasm, several seconds of compilation) compiles
// once per machine and wazero version, not once per test or package.
//
// wazero keys each entry by the module's bytes and writes it under a
// directory named for its own version, through a temporary file renamed
// into place, so test processes running at once share the directory
// safely and a changed module (a rebuilt plugin, an instrumented rewrite)
// is compiled afresh. Tests that are about compiling itself (a deadline
// during compilation, the cache's own behaviour) keep a cache of their own.
package testwasm

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
)

// DirEnv names a directory to use in place of the default,
// os.UserCacheDir()/compact-host-test/wazero (os.TempDir() when the user
// has no cache directory).
const DirEnv = "COMPACT_HOST_TEST_WAZERO_CACHE"

// Entries older than maxAge or past maxBytes (oldest first) are removed
// once per test process: each rebuild of a plugin leaves an entry of tens
// of megabytes that nothing reads again.
const (
	maxAge   = 7 * 24 * time.Hour
	maxBytes = 2 << 30
)

var (
	dirOnce sync.Once
	dir     string
	dirErr  error

	cacheOnce sync.Once
	cache     wazero.CompilationCache
	cacheErr  error
)

// Dir returns the shared cache directory, made on first use, for
// plugin.Options.CacheDir, wasmrt.Config.CacheDir or the CLI's
// COMPACT_HOST_CACHE_DIR.
func Dir(tb testing.TB) string {
	tb.Helper()
	dirOnce.Do(func() { dir, dirErr = makeDir() })
	if dirErr != nil {
		tb.Fatalf("testwasm: %v (set %s to a writable directory)", dirErr, DirEnv)
	}
	return dir
}

// Cache returns one process-wide compilation cache over Dir, for tests
// that make wazero runtimes themselves. It is never closed: it lives as
// long as the test process.
func Cache(tb testing.TB) wazero.CompilationCache {
	tb.Helper()
	d := Dir(tb)
	cacheOnce.Do(func() { cache, cacheErr = wazero.NewCompilationCacheWithDir(d) })
	if cacheErr != nil {
		tb.Fatalf("testwasm: compilation cache %s: %v (set %s to a writable directory)", d, cacheErr, DirEnv)
	}
	return cache
}

// NewRuntime returns a wazero runtime over Cache, closed when the test ends.
func NewRuntime(tb testing.TB) wazero.Runtime {
	tb.Helper()
	rt := wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfig().WithCompilationCache(Cache(tb)))
	tb.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

func makeDir() (string, error) {
	d := os.Getenv(DirEnv)
	if d == "" {
		base, err := os.UserCacheDir()
		if err != nil || os.MkdirAll(base, 0o700) != nil {
			base = os.TempDir()
		}
		d = filepath.Join(base, "compact-host-test", "wazero")
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("wazero compilation cache for tests: %w", err)
	}
	prune(d, time.Now())
	return d, nil
}

// prune removes entries older than maxAge, then the oldest until the rest
// fit in maxBytes. wazero keeps its entries one level down, in a
// directory per wazero version. Errors leave entries in place: a cache
// that stays too large costs disk, not correctness.
func prune(root string, now time.Time) {
	type entry struct {
		path string
		mod  time.Time
		size int64
	}
	var kept []entry
	versions, _ := os.ReadDir(root)
	for _, v := range versions {
		if !v.IsDir() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(root, v.Name()))
		for _, f := range files {
			info, err := f.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			p := filepath.Join(root, v.Name(), f.Name())
			if now.Sub(info.ModTime()) > maxAge {
				os.Remove(p)
				continue
			}
			kept = append(kept, entry{p, info.ModTime(), info.Size()})
		}
	}
	slices.SortFunc(kept, func(a, b entry) int { return b.mod.Compare(a.mod) })
	var total int64
	for _, e := range kept {
		total += e.size
		if total > maxBytes {
			os.Remove(e.path)
		}
	}
}

// FuzzCache is Cache for a fuzz test's seed corpus, and a fresh in-memory
// cache under -test.fuzz, where every random module that compiles would
// leave an entry on disk that nothing reads again.
func FuzzCache(tb testing.TB) wazero.CompilationCache {
	tb.Helper()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		c := wazero.NewCompilationCache()
		tb.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	return Cache(tb)
}
