package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
	"github.com/compact-host/compact-host/internal/proctest"
)

// entriesByFile returns the user entries of a registry's List by file name.
func entriesByFile(r *Registry) map[string]Entry {
	out := map[string]Entry{}
	for _, e := range r.List(context.Background()) {
		if e.Path != "" {
			out[filepath.Base(e.Path)] = e
		}
	}
	return out
}

// registryWithin builds a registry and fails the test if that has not
// returned after a generous bound: a hang guard, not a timing check. The
// bound covers compiling the test plugin under the race detector on two
// busy cores, which was seen to take over a minute.
func registryWithin(t *testing.T, opts Options) *Registry {
	t.Helper()
	type result struct {
		r   *Registry
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := NewRegistry(context.Background(), opts)
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		require.NoError(t, res.err)
		t.Cleanup(func() { res.r.Close() })
		return res.r
	case <-time.After(5 * time.Minute):
		require.FailNow(t, "NewRegistry did not return")
		return nil
	}
}

// A process plugin whose Info never answers fails at its deadline; the
// registry (and so `serve`, which waits for it) does not hang.
func TestInfoThatNeverAnswersDoesNotHangTheRegistry(t *testing.T) {
	opts := testOptions(t, nil)
	opts.Builtins = nil
	opts.HandshakeTimeout = 500 * time.Millisecond
	manifest := filepath.Join(opts.PluginsDir, "hang"+ManifestSuffix)
	require.NoError(t, os.WriteFile(manifest, []byte(`{"command": "`+build(t, "infohang", false, "")+`"}`), 0o644))
	r := registryWithin(t, opts)
	e := entriesByFile(r)["hang"+ManifestSuffix]
	assert.ErrorIs(t, e.Err, ErrDeadlineExceeded)
	require.Error(t, e.Err)
	assert.Contains(t, e.Err.Error(), "infohang", "the error names the file")
}

// Special files named like plugins are refused without being read: a
// FIFO would block discovery for ever, /dev/zero exhaust the memory.
func TestSpecialFilesAreRefused(t *testing.T) {
	opts := testOptions(t, nil)
	opts.Builtins = nil
	dir := opts.PluginsDir
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.wasm"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"+ManifestSuffix), 0o644))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero.wasm")))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero"+ManifestSuffix)))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "testplug.wasm"), testplugWasm(t), 0o644))
	r := registryWithin(t, opts)

	entries := entriesByFile(r)
	for _, file := range []string{"fifo.wasm", "fifo" + ManifestSuffix, "zero.wasm", "zero" + ManifestSuffix} {
		e, ok := entries[file]
		if assert.True(t, ok, "%s is listed", file) {
			assert.ErrorIs(t, e.Err, ErrInvalidPlugin, file)
			if assert.Error(t, e.Err, file) {
				assert.Contains(t, e.Err.Error(), "not a regular file", file)
			}
		}
	}
	assert.NoError(t, entries["testplug.wasm"].Err, "the regular plugin beside them loads")
	_, err := OpenWasmFile(context.Background(), filepath.Join(dir, "fifo.wasm"), opts)
	assert.ErrorIs(t, err, ErrInvalidPlugin)
}

func TestFileOverTheSizeLimitIsRefused(t *testing.T) {
	opts := testOptions(t, nil)
	opts.Builtins = nil
	opts.MaxFileBytes = 1 << 10
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "testplug.wasm"), testplugWasm(t), 0o644))
	r := registryWithin(t, opts)
	e := entriesByFile(r)["testplug.wasm"]
	assert.ErrorIs(t, e.Err, ErrInvalidPlugin)
	if assert.Error(t, e.Err) {
		assert.Contains(t, e.Err.Error(), "MaxFileBytes", "the error names the option")
	}
}

// Listing plugins runs no process plugin the host has seen before: its
// Info comes from the cache, keyed by the content of its files.
func TestListingStartsAKnownProcessPluginOnce(t *testing.T) {
	opts := testOptions(t, nil)
	opts.Builtins = nil
	opts.CacheDir = t.TempDir()
	bin := build(t, "testplug", false, "-X main.hostile=yes -X main.marker=started.log")
	require.NoError(t, os.WriteFile(filepath.Join(opts.PluginsDir, "mark"+ManifestSuffix), []byte(`{"command": "`+bin+`"}`), 0o644))
	starts := func() int {
		b, err := os.ReadFile(filepath.Join(opts.PluginsDir, "started.log"))
		if os.IsNotExist(err) {
			return 0
		}
		require.NoError(t, err)
		return strings.Count(string(b), "started\n")
	}
	list := func() Entry {
		r, err := NewRegistry(context.Background(), opts)
		require.NoError(t, err)
		defer r.Close()
		return entriesByFile(r)["mark"+ManifestSuffix]
	}

	first := list()
	require.NoError(t, first.Err)
	assert.Equal(t, 1, starts())
	second := list()
	require.NoError(t, second.Err)
	assert.Equal(t, 1, starts(), "the second listing started the plugin")
	assert.True(t, second.Loaded)
	assert.Equal(t, first.Info, second.Info)
	assert.Equal(t, "testplug", second.Name)

	// Its first use starts it.
	r := newRegistry(t, opts)
	p, err := r.Truncator(context.Background(), "noop")
	require.NoError(t, err)
	resp, err := p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "noop", Content: []byte("x"), MaxTokens: 4})
	require.NoError(t, err)
	assert.Equal(t, "x", string(resp.Content))
	assert.Equal(t, 2, starts())
}

// countingModel answers every completion and records the max_tokens it
// was asked for.
type countingModel struct {
	OfflineServices
	mu        sync.Mutex
	maxTokens []int
}

func (m *countingModel) Complete(_ context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.maxTokens = append(m.maxTokens, req.MaxTokens)
	return &abi.CompleteResponse{Text: "ok"}, nil
}

func (m *countingModel) MaxOutputTokens() int { return 8192 }

// A plugin calling the model in a loop with max_tokens of 2e9 gets at
// most the cap of completions, each clamped to the model's output limit,
// on both transports.
func TestCompletionsPerCallAreCappedAndClamped(t *testing.T) {
	opts := testOptions(t, nil)
	opts.MaxCompletionsPerCall = 5
	wasm, err := OpenWasm(context.Background(), testplugWasm(t), "testplug.wasm", opts)
	require.NoError(t, err)
	defer wasm.Close()
	proc, err := StartProcess(context.Background(), Manifest{Command: build(t, "testplug", false, "-X main.hostile=yes")}, opts)
	require.NoError(t, err)
	defer proc.Close()

	for _, p := range []*Plugin{wasm, proc} {
		model := &countingModel{}
		resp, err := p.Truncate(context.Background(), model, &abi.TruncateRequest{Category: "completeloop", Content: []byte("x"), MaxTokens: 1000})
		require.NoError(t, err, p.Source())
		assert.Equal(t, "5", string(resp.Content), "%s: completions granted", p.Source())
		assert.Len(t, model.maxTokens, 5, p.Source())
		for _, n := range model.maxTokens {
			assert.Equal(t, 8192, n, "%s: max_tokens clamped to the model's output limit", p.Source())
		}
		// The cap is per call.
		resp, err = p.Truncate(context.Background(), model, &abi.TruncateRequest{Category: "completeloop", Content: []byte("x"), MaxTokens: 2})
		require.NoError(t, err)
		assert.Equal(t, "2", string(resp.Content))
	}

	opts.MaxCompletionTokens = 100
	p, err := OpenWasm(context.Background(), testplugWasm(t), "testplug.wasm", opts)
	require.NoError(t, err)
	defer p.Close()
	model := &countingModel{}
	_, err = p.Truncate(context.Background(), model, &abi.TruncateRequest{Category: "completeloop", Content: []byte("x"), MaxTokens: 1})
	require.NoError(t, err)
	assert.Equal(t, []int{100}, model.maxTokens, "MaxCompletionTokens clamps below the model's limit")
}

// A plugin that logs in a loop writes at most the per-call limit into
// the host's log, and one note of what was dropped, on both transports.
func TestLogFloodIsBoundedPerCall(t *testing.T) {
	for _, source := range []Source{SourceWasm, SourceProcess} {
		t.Run(string(source), func(t *testing.T) {
			logs := &logBuffer{}
			opts := testOptions(t, logs)
			var p *Plugin
			var err error
			if source == SourceWasm {
				p, err = OpenWasm(context.Background(), testplugWasm(t), "testplug.wasm", opts)
			} else {
				p, err = StartProcess(context.Background(), Manifest{Command: build(t, "testplug", false, "-X main.hostile=yes")}, opts)
			}
			require.NoError(t, err)
			defer p.Close()
			const lines = pluginapi.MaxLogLinesPerCall + 3000
			_, err = p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "logflood", Content: []byte("x"), MaxTokens: lines})
			require.NoError(t, err)
			got := logs.String()
			assert.Equal(t, pluginapi.MaxLogLinesPerCall, strings.Count(got, strings.Repeat("L", 100)))
			assert.Equal(t, 1, strings.Count(got, "lines of plugin log dropped"))
			assert.Contains(t, got, strconv.Itoa(3000)+" lines of plugin log dropped")

			// The next call has a budget of its own.
			_, err = p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "logflood", Content: []byte("x"), MaxTokens: 10})
			require.NoError(t, err)
			assert.Equal(t, pluginapi.MaxLogLinesPerCall+10, strings.Count(logs.String(), strings.Repeat("L", 100)))
		})
	}
}

// dropHangingPlugin drops a manifest of a plugin that never completes its
// handshake into the watched directory of a new registry, and returns the
// registry, the manifest and the plugin's process ID once it runs. The
// handshake timeout is an hour: only the stop under test ends it.
func dropHangingPlugin(t *testing.T) (*Registry, string, int) {
	t.Helper()
	opts := testOptions(t, nil)
	opts.Builtins = nil
	opts.HandshakeTimeout = time.Hour
	r := newRegistry(t, opts)
	pidFile := filepath.Join(t.TempDir(), "pid")
	manifest := filepath.Join(opts.PluginsDir, "hang"+ManifestSuffix)
	m, err := json.Marshal(Manifest{Command: build(t, "nohandshake", false, ""), Args: []string{pidFile}})
	require.NoError(t, err)
	copyFile(t, manifest, m)
	return r, manifest, proctest.ReadPID(t, pidFile, time.Minute)
}

// Closing the registry (serve stopping) while a dropped-in plugin hangs at
// its handshake kills and reaps the process before Close returns.
func TestCloseReapsAPluginHangingAtItsHandshake(t *testing.T) {
	r, _, pid := dropHangingPlugin(t)
	closed := make(chan struct{})
	go func() { r.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute): // a hang guard
		require.FailNow(t, "Close did not return")
	}
	proctest.RequireGone(t, pid, time.Minute)
}

// Removing the manifest of a plugin hanging at its handshake stops its
// load: the process goes, and no entry is left for the removed file.
func TestRemovingAHangingPluginReapsIt(t *testing.T) {
	r, manifest, pid := dropHangingPlugin(t)
	require.NoError(t, os.Remove(manifest))
	proctest.RequireGone(t, pid, time.Minute)
	assert.Eventually(t, func() bool { _, ok := entriesByFile(r)["hang"+ManifestSuffix]; return !ok },
		time.Minute, 20*time.Millisecond, "the removed file is not listed")
}
