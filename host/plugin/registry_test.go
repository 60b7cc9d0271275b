package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/builtin"
	"github.com/compact-host/compact-host/host/plugin/wasm"
)

func TestDefaultPluginsDir(t *testing.T) {
	t.Setenv(EnvPluginsDir, "/from/env")
	dir, _ := (Options{}).pluginsDir()
	assert.Equal(t, "/from/env", dir, "with %s set", EnvPluginsDir)
	dir, _ = (Options{PluginsDir: "/from/option"}).pluginsDir()
	assert.Equal(t, "/from/option", dir, "with the option set")
	t.Setenv(EnvPluginsDir, "")
	config, err := os.UserConfigDir()
	if err != nil {
		t.Skip(err)
	}
	dir, _ = (Options{}).pluginsDir()
	assert.Equal(t, filepath.Join(config, "compact-host", "plugins"), dir, "default dir")
}

func TestBuiltinsLoadOnFirstUse(t *testing.T) {
	names := builtin.Names()
	if len(names) == 0 {
		t.Skip("no built-in plugin is embedded yet (make plugins)")
	}
	r := newRegistry(t, testOptions(t, nil))
	r.mu.Lock()
	for _, b := range r.builtins {
		assert.Nil(t, b.plugin, "built-in %s was loaded before its first use", b.entry.Name)
	}
	r.mu.Unlock()
	for _, e := range r.List(context.Background()) {
		if e.Source == SourceBuiltin {
			assert.True(t, e.Loaded, e.Name)
			assert.NoError(t, e.Err, e.Name)
			assert.Equal(t, e.Name, e.Info.Name)
		}
	}
}

func TestDroppedInPluginIsUsedWithoutRestart(t *testing.T) {
	logs := &logBuffer{}
	opts := testOptions(t, logs)
	r := newRegistry(t, opts)
	_, err := r.Strategy(context.Background(), "testplug")
	require.ErrorIs(t, err, ErrNotFound, "before the drop")
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
	require.NoError(t, err)
	require.Equal(t, "testplug", p.Name())

	// Replacing the file reloads it: here by a plugin that always traps.
	copyFile(t, filepath.Join(opts.PluginsDir, "testplug.wasm"), hostileWasm(t, "trap"))
	eventually(t, "the replaced file is reloaded", func() error {
		if _, err := r.Truncator(context.Background(), "spin"); !errors.Is(err, ErrNotFound) {
			return errors.New("still the old plugin")
		}
		return nil
	})
	// The old plugin is closed once replaced.
	eventually(t, "the replaced plugin is closed", func() error {
		_, err := p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: 4})
		if !errors.Is(err, ErrClosed) {
			return fmt.Errorf("err = %v, want ErrClosed", err)
		}
		return nil
	})

	// Removing it forgets it.
	require.NoError(t, os.Remove(filepath.Join(opts.PluginsDir, "testplug.wasm")))
	eventually(t, "the removed plugin is forgotten", func() error {
		for _, e := range r.List(context.Background()) {
			if e.Path != "" {
				return errors.New("still listed: " + e.Path)
			}
		}
		return nil
	})
	assert.Contains(t, logs.String(), "plugin loaded")
	assert.Contains(t, logs.String(), "plugin removed")
}

func TestBrokenPluginIsReportedAndSkipped(t *testing.T) {
	logs := &logBuffer{}
	opts := testOptions(t, logs)
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "garbage.wasm"), []byte("not wasm"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "v2.wasm"), hostileWasm(t, "v2"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "bad"+ManifestSuffix), []byte(`{"args": []}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "testplug.wasm"), testplugWasm(t), 0o644))
	r := newRegistry(t, opts)

	entries := entriesByFile(r)
	for file, kind := range map[string]error{"garbage.wasm": ErrInvalidPlugin, "v2.wasm": ErrVersionMismatch, "bad" + ManifestSuffix: ErrInvalidPlugin} {
		assert.ErrorIs(t, entries[file].Err, kind, file)
	}
	if assert.Error(t, entries["v2.wasm"].Err) {
		assert.Contains(t, entries["v2.wasm"].Err.Error(), "plugin wants ABI v2, host speaks v1")
	}
	require.NoError(t, entries["testplug.wasm"].Err, "the healthy plugin")
	_, err := r.Strategy(context.Background(), "testplug")
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "plugin failed to load; skipped")
}

func TestUserPluginOverridesBuiltin(t *testing.T) {
	if _, ok := builtin.Wasm("truncate"); !ok {
		t.Skip("the truncate built-in is not embedded yet (make plugins)")
	}
	logs := &logBuffer{}
	opts := testOptions(t, logs)
	manifest := `{"command": "` + build(t, "testplug", false, "-X main.hostile=yes -X main.name=truncate") + `"}`
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "mine"+ManifestSuffix), []byte(manifest), 0o644))
	r := newRegistry(t, opts)
	p, err := r.Strategy(context.Background(), "truncate")
	require.NoError(t, err)
	assert.Equal(t, SourceProcess, p.Source(), "Strategy(truncate) is the user's process plugin")
	assert.Contains(t, logs.String(), "overrides the built-in")
	for _, e := range r.List(context.Background()) {
		if e.Source == SourceBuiltin && e.Name == "truncate" {
			assert.True(t, e.Overridden, "built-in entry marked overridden")
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
		require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, name+".wasm"), hostileWasm(t, name), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "testplug.wasm"), testplugWasm(t), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "crasher"+ManifestSuffix), []byte(`{"command": "`+build(t, "testplug", false, "-X main.hostile=yes -X main.name=crasher")+`"}`), 0o644))
	r := newRegistry(t, opts)

	healthy := func() {
		t.Helper()
		p, err := r.Strategy(context.Background(), "testplug")
		require.NoError(t, err)
		_, err = p.Summarize(context.Background(), nil, smallSession)
		require.NoError(t, err, "healthy plugin after a hostile one")
	}
	for name, kind := range map[string]error{
		"trap": ErrTrap, "loop": ErrDeadlineExceeded, "grow": ErrMemoryLimit,
		"malformed": ErrMalformedOutput, "huge": ErrOutputTooLarge, "oob": ErrMalformedOutput,
	} {
		p, err := r.Strategy(context.Background(), name)
		require.NoError(t, err, name)
		// Only loop needs its deadline; the bound on the others keeps a
		// regression from hanging the test, and is generous for -race.
		timeout := 30 * time.Second
		if name == "loop" {
			timeout = 300 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		_, err = p.Summarize(ctx, nil, smallSession)
		cancel()
		assert.ErrorIs(t, err, kind, name)
		healthy()
	}
	crasher, err := r.Truncator(context.Background(), "exit")
	require.NoError(t, err)
	// testplug.wasm sorts after crasher.plugin.json, so "exit" finds the process.
	require.Equal(t, "crasher", crasher.Name())
	_, err = crasher.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "exit", Content: []byte("x"), MaxTokens: 4})
	assert.ErrorIs(t, err, ErrCrash)
	healthy()
	_, err = crasher.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: 4})
	assert.NoError(t, err, "crasher after restart")
}

func TestReplacedProcessExecutableReloads(t *testing.T) {
	opts := testOptions(t, nil)
	install := func(src string) {
		t.Helper()
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		tmp := filepath.Join(opts.PluginsDir, ".tp.tmp")
		require.NoError(t, os.WriteFile(tmp, b, 0o755))
		require.NoError(t, os.Rename(tmp, filepath.Join(opts.PluginsDir, "tp")))
	}
	install(build(t, "testplug", false, "-X main.hostile=yes"))
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "tp"+ManifestSuffix), []byte(`{"command": "./tp"}`), 0o644))
	r := newRegistry(t, opts)
	_, err := r.Strategy(context.Background(), "testplug")
	require.NoError(t, err)
	install(build(t, "testplug", false, "-X main.hostile=yes -X main.name=renamed"))
	eventually(t, "the new executable is started", func() error {
		_, err := r.Strategy(context.Background(), "renamed")
		return err
	})
}

// The runtimes are wired in through Options: without one, its kind of
// plugin is refused with ErrNoRuntime, named in the list, and the rest of
// the registry works.
func TestPluginWithoutItsRuntimeIsRefused(t *testing.T) {
	ctx := context.Background()
	opts := testOptions(t, nil)
	opts.Wasm, opts.Process, opts.Builtins = nil, nil, nil
	bin := testplugWasm(t)
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "testplug.wasm"), bin, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "proc"+ManifestSuffix), []byte(`{"command": "`+build(t, "testplug", false, "-X main.hostile=yes")+`"}`), 0o644))
	r := newRegistry(t, opts)
	entries := entriesByFile(r)
	for file, option := range map[string]string{"testplug.wasm": "Options.Wasm", "proc" + ManifestSuffix: "Options.Process"} {
		e := entries[file]
		assert.ErrorIs(t, e.Err, ErrNoRuntime, file)
		assert.False(t, e.Loaded, file)
		if assert.Error(t, e.Err, file) {
			assert.Contains(t, e.Err.Error(), option, "the error names the option")
		}
	}
	assert.Len(t, r.List(ctx), 2, "no built-ins without Options.Builtins")
	_, err := r.Strategy(ctx, "testplug")
	assert.ErrorIs(t, err, ErrNotFound)

	_, err = OpenWasm(ctx, bin, "testplug.wasm", opts)
	assert.ErrorIs(t, err, ErrNoRuntime)
	_, err = Open(ctx, filepath.Join(opts.PluginsDir, "proc"+ManifestSuffix), opts)
	assert.ErrorIs(t, err, ErrNoRuntime)
	opts.Builtins = wasm.Builtins
	_, err = NewRegistry(ctx, opts)
	assert.Error(t, err, "built-ins without the wasm runtime to run them")

	// With the runtime wired in, the same file loads.
	opts.Wasm = wasm.Runtime
	p, err := OpenWasm(ctx, bin, "testplug.wasm", opts)
	require.NoError(t, err)
	p.Close()
}
