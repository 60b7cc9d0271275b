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
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
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
// wasmrt.Config.CacheDir; ShareCompiled makes one for plugin.Options or
// the CLI's cache_dir.
func Dir() (string, error) {
	dirOnce.Do(func() { dir, dirErr = makeDir() })
	return dir, dirErr
}

// Cache returns one process-wide compilation cache over Dir, for tests
// that make wazero runtimes themselves. It is never closed: it lives as
// long as the test process.
func Cache() (wazero.CompilationCache, error) {
	d, err := Dir()
	if err != nil {
		return nil, err
	}
	cacheOnce.Do(func() {
		cache, cacheErr = wazero.NewCompilationCacheWithDir(d)
		if cacheErr != nil {
			cacheErr = fmt.Errorf("testwasm: compilation cache %s: %w (set %s to a writable directory)", d, cacheErr, DirEnv)
		}
	})
	return cache, cacheErr
}

// NewRuntime returns a wazero runtime over Cache, closed when the test ends.
func NewRuntime(tb testing.TB) wazero.Runtime {
	tb.Helper()
	c, err := Cache()
	if err != nil {
		tb.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfig().WithCompilationCache(c))
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
		return "", fmt.Errorf("testwasm: %w (set %s to a writable directory)", err, DirEnv)
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

// ShareCompiled makes the compiled modules that an Engine with its cache
// in dir keeps those of Dir, and returns dir: wazero's subdirectory of dir
// becomes a link to Dir's. Everything else a host keeps in its cache
// directory (what process plugins said about themselves, keyed by their
// manifest and executable but not by the files those read) stays in dir,
// the test's own.
func ShareCompiled(dir string) (string, error) {
	shared, err := Dir()
	if err != nil {
		return "", err
	}
	shared = filepath.Join(shared, versionDir())
	if err := os.MkdirAll(shared, 0o700); err != nil {
		return "", fmt.Errorf("testwasm: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("testwasm: %w", err)
	}
	if err := os.Symlink(shared, filepath.Join(dir, versionDir())); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("testwasm: %w", err)
	}
	return dir, nil
}

// versionDir is the subdirectory wazero.NewCompilationCacheWithDir keeps
// its entries in: wazero-<the wazero module's version>-<arch>-<os>, the
// version read from the build as wazero reads it. Were wazero to name it
// otherwise, it would make a directory of its own beside the link, and
// the modules would compile once per test instead of once per machine.
func versionDir() string {
	version := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if strings.Contains(dep.Path, "github.com/tetratelabs/wazero") {
				version = dep.Version
			}
		}
		if version == "" || version == "(devel)" {
			version = info.Main.Version
		}
	}
	if version == "" || version == "(devel)" {
		version = "dev"
	}
	return "wazero-" + version + "-" + runtime.GOARCH + "-" + runtime.GOOS
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
	c, err := Cache()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
