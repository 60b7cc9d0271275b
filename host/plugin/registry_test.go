package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/builtin"
)

func TestDefaultPluginsDir(t *testing.T) {
	t.Setenv(EnvPluginsDir, "/from/env")
	if dir, _ := (Options{}).pluginsDir(); dir != "/from/env" {
		t.Fatalf("with %s set: dir = %q", EnvPluginsDir, dir)
	}
	if dir, _ := (Options{PluginsDir: "/from/option"}).pluginsDir(); dir != "/from/option" {
		t.Fatalf("with the option set: dir = %q", dir)
	}
	t.Setenv(EnvPluginsDir, "")
	config, err := os.UserConfigDir()
	if err != nil {
		t.Skip(err)
	}
	if dir, _ := (Options{}).pluginsDir(); dir != filepath.Join(config, "compact-host", "plugins") {
		t.Fatalf("default dir = %q", dir)
	}
}

func TestBuiltinsLoadOnFirstUse(t *testing.T) {
	names := builtin.Names()
	if len(names) == 0 {
		t.Skip("no built-in plugin is embedded yet (make plugins)")
	}
	r := newRegistry(t, testOptions(t, nil))
	r.mu.Lock()
	for _, b := range r.builtins {
		if b.plugin != nil {
			t.Errorf("built-in %s was loaded before its first use", b.entry.Name)
		}
	}
	r.mu.Unlock()
	for _, e := range r.List(context.Background()) {
		if e.Source == SourceBuiltin && (!e.Loaded || e.Err != nil || e.Info.Name != e.Name) {
			t.Errorf("built-in entry %+v", e)
		}
	}
}

func TestDroppedInPluginIsUsedWithoutRestart(t *testing.T) {
	logs := &logBuffer{}
	opts := testOptions(t, logs)
	r := newRegistry(t, opts)
	if _, err := r.Strategy(context.Background(), "testplug"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before the drop: err = %v, want ErrNotFound", err)
	}
	copyFile(t, filepath.Join(opts.PluginsDir, "testplug.wasm"), testplugWasm(t))
	eventually(t, "the dropped-in plugin is found", func() error {
		p, err := r.Strategy(context.Background(), "testplug")
		if err != nil {
			return err
		}
		_, err = p.Summarize(context.Background(), nil, smallSession)
		return err
	})
	p, err := r.Truncator(context.Background(), "spin")
	if err != nil || p.Name() != "testplug" {
		t.Fatalf("Truncator(spin) = %v, %v", p, err)
	}

	// Replacing the file reloads it: here by a plugin that always traps.
	copyFile(t, filepath.Join(opts.PluginsDir, "testplug.wasm"), hostileWasm(t, "trap"))
	eventually(t, "the replaced file is reloaded", func() error {
		if _, err := r.Truncator(context.Background(), "spin"); !errors.Is(err, ErrNotFound) {
			return errors.New("still the old plugin")
		}
		return nil
	})
	// The old plugin was closed once replaced.
	if _, err := p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: 4}); !errors.Is(err, ErrClosed) {
		eventually(t, "the replaced plugin is closed", func() error {
			_, err := p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: 4})
			if !errors.Is(err, ErrClosed) {
				return err
			}
			return nil
		})
	}

	// Removing it forgets it.
	os.Remove(filepath.Join(opts.PluginsDir, "testplug.wasm"))
	eventually(t, "the removed plugin is forgotten", func() error {
		for _, e := range r.List(context.Background()) {
			if e.Path != "" {
				return errors.New("still listed: " + e.Path)
			}
		}
		return nil
	})
	if !strings.Contains(logs.String(), "plugin loaded") || !strings.Contains(logs.String(), "plugin removed") {
		t.Errorf("log misses the load or removal:\n%s", logs)
	}
}

func TestBrokenPluginIsReportedAndSkipped(t *testing.T) {
	logs := &logBuffer{}
	opts := testOptions(t, logs)
	os.WriteFile(filepath.Join(opts.PluginsDir, "garbage.wasm"), []byte("not wasm"), 0o644)
	os.WriteFile(filepath.Join(opts.PluginsDir, "v2.wasm"), hostileWasm(t, "v2"), 0o644)
	os.WriteFile(filepath.Join(opts.PluginsDir, "bad"+ManifestSuffix), []byte(`{"args": []}`), 0o644)
	os.WriteFile(filepath.Join(opts.PluginsDir, "testplug.wasm"), testplugWasm(t), 0o644)
	r := newRegistry(t, opts)

	errs := map[string]error{}
	for _, e := range r.List(context.Background()) {
		if e.Path != "" {
			errs[filepath.Base(e.Path)] = e.Err
		}
	}
	for file, kind := range map[string]error{"garbage.wasm": ErrInvalidPlugin, "v2.wasm": ErrVersionMismatch, "bad" + ManifestSuffix: ErrInvalidPlugin} {
		if !errors.Is(errs[file], kind) {
			t.Errorf("%s: entry error %v, want %v", file, errs[file], kind)
		}
	}
	if !strings.Contains(errs["v2.wasm"].Error(), "plugin wants ABI v2, host speaks v1") {
		t.Errorf("v2.wasm: %v", errs["v2.wasm"])
	}
	if errs["testplug.wasm"] != nil {
		t.Fatalf("the healthy plugin failed: %v", errs["testplug.wasm"])
	}
	if _, err := r.Strategy(context.Background(), "testplug"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "plugin failed to load; skipped") {
		t.Errorf("no log line for the broken plugins:\n%s", logs)
	}
}

func TestUserPluginOverridesBuiltin(t *testing.T) {
	if _, ok := builtin.Wasm("truncate"); !ok {
		t.Skip("the truncate built-in is not embedded yet (make plugins)")
	}
	logs := &logBuffer{}
	opts := testOptions(t, logs)
	manifest := `{"command": "` + build(t, "testplug", false, "-X main.hostile=yes -X main.name=truncate") + `"}`
	os.WriteFile(filepath.Join(opts.PluginsDir, "mine"+ManifestSuffix), []byte(manifest), 0o644)
	r := newRegistry(t, opts)
	p, err := r.Strategy(context.Background(), "truncate")
	if err != nil {
		t.Fatal(err)
	}
	if p.Source() != SourceProcess {
		t.Fatalf("Strategy(truncate) is the %s plugin, want the user's process plugin", p.Source())
	}
	if !strings.Contains(logs.String(), "overrides the built-in") {
		t.Errorf("no override notice in the log:\n%s", logs)
	}
	for _, e := range r.List(context.Background()) {
		if e.Source == SourceBuiltin && e.Name == "truncate" && !e.Overridden {
			t.Errorf("built-in entry not marked overridden: %+v", e)
		}
	}
}

// Every hostile plugin fails with its typed error, and the healthy plugin
// of the same registry keeps answering.
func TestHostilePluginsInARegistry(t *testing.T) {
	opts := testOptions(t, nil)
	opts.MemoryLimitBytes = 16 << 20
	for _, name := range []string{"trap", "loop", "grow", "malformed", "huge", "oob"} {
		// Each hostile plugin's name is its file name; give each its own
		// category so Truncator finds it.
		os.WriteFile(filepath.Join(opts.PluginsDir, name+".wasm"), hostileWasm(t, name), 0o644)
	}
	os.WriteFile(filepath.Join(opts.PluginsDir, "testplug.wasm"), testplugWasm(t), 0o644)
	os.WriteFile(filepath.Join(opts.PluginsDir, "crasher"+ManifestSuffix), []byte(`{"command": "`+build(t, "testplug", false, "-X main.hostile=yes -X main.name=crasher")+`"}`), 0o644)
	r := newRegistry(t, opts)

	healthy := func() {
		t.Helper()
		p, err := r.Strategy(context.Background(), "testplug")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Summarize(context.Background(), nil, smallSession); err != nil {
			t.Fatalf("healthy plugin after a hostile one: %v", err)
		}
	}
	for name, kind := range map[string]error{
		"trap": ErrTrap, "loop": ErrDeadlineExceeded, "grow": ErrMemoryLimit,
		"malformed": ErrMalformedOutput, "huge": ErrOutputTooLarge, "oob": ErrMalformedOutput,
	} {
		p, err := r.Strategy(context.Background(), name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Only loop needs its deadline; the bound on the others keeps a
		// regression from hanging the test, and is generous for -race.
		timeout := 30 * time.Second
		if name == "loop" {
			timeout = 300 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		_, err = p.Summarize(ctx, nil, smallSession)
		cancel()
		if !errors.Is(err, kind) {
			t.Errorf("%s: err = %v, want %v", name, err, kind)
		}
		healthy()
	}
	crasher, err := r.Truncator(context.Background(), "exit")
	if err != nil {
		t.Fatal(err)
	}
	// testplug.wasm sorts after crasher.plugin.json, so "exit" finds the process.
	if crasher.Name() != "crasher" {
		t.Fatalf("Truncator(exit) = %s", crasher.Name())
	}
	_, err = crasher.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "exit", Content: []byte("x"), MaxTokens: 4})
	if !errors.Is(err, ErrCrash) {
		t.Errorf("crasher: err = %v, want ErrCrash", err)
	}
	healthy()
	if _, err := crasher.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: 4}); err != nil {
		t.Errorf("crasher after restart: %v", err)
	}
}

func TestReplacedProcessExecutableReloads(t *testing.T) {
	opts := testOptions(t, nil)
	install := func(src string) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(opts.PluginsDir, ".tp.tmp")
		if err := os.WriteFile(tmp, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(opts.PluginsDir, "tp")); err != nil {
			t.Fatal(err)
		}
	}
	install(build(t, "testplug", false, "-X main.hostile=yes"))
	os.WriteFile(filepath.Join(opts.PluginsDir, "tp"+ManifestSuffix), []byte(`{"command": "./tp"}`), 0o644)
	r := newRegistry(t, opts)
	if _, err := r.Strategy(context.Background(), "testplug"); err != nil {
		t.Fatal(err)
	}
	install(build(t, "testplug", false, "-X main.hostile=yes -X main.name=renamed"))
	eventually(t, "the new executable is started", func() error {
		_, err := r.Strategy(context.Background(), "renamed")
		return err
	})
}
