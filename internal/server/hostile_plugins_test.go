package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
)

// TestHostilePluginDroppedWhileServing drops a module of a few hundred
// bytes that declares 16 GiB of locals into the watched plugins directory
// of a server answering clients. Loading it used to make the host
// allocate until the kernel killed it; now the server keeps answering,
// and lists the file as failed to load.
func TestHostilePluginDroppedWhileServing(t *testing.T) {
	bomb, err := os.ReadFile(filepath.Join(repoRoot(t), "host", "internal", "wasmrt", "testdata", "locals.wasm"))
	require.NoError(t, err)
	require.Less(t, len(bomb), 1024, "the hostile module is tiny")
	dir := t.TempDir()
	reg, err := plugin.NewRegistry(context.Background(), plugin.Options{Wasm: wasm.Runtime, Builtins: wasm.Builtins, Process: process.Runtime, PluginsDir: dir, CacheDir: cacheDir, WatchDebounce: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })
	_, ts := start(t, func(o *Options) { o.Registry = reg })

	// Clients truncate in a loop, each at most maxCalls times, until told
	// to stop; fewer clients than the server's workers, so none is busy.
	const clients, maxCalls = 3, 500
	var (
		served   atomic.Int64
		failures = make(chan error, clients)
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	req := TruncateRequest{Tool: "Bash", Content: testOutput(400), MaxTokens: 100}
	// The first answer compiles the built-in truncator; the clients start
	// after it.
	var first TruncateResponse
	call(t, ts, "POST", "/v1/truncate", req).decode(t, &first)
	require.True(t, first.Truncated)
	for c := range clients {
		wg.Go(func() {
			for range maxCalls {
				select {
				case <-stop:
					return
				default:
				}
				r, err := do(ts, "POST", "/v1/truncate", req)
				if err == nil && r.Status != http.StatusOK {
					err = fmt.Errorf("status %d: %s", r.Status, r.Body)
				}
				if err != nil {
					failures <- fmt.Errorf("client %d after %d answers: %w", c, served.Load(), err)
					return
				}
				served.Add(1)
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	answersAfter := func(n int64, what string) {
		t.Helper()
		eventually(t, what, func() error {
			if got := served.Load(); got < n {
				return fmt.Errorf("%d answers so far", got)
			}
			return nil
		})
	}
	answersAfter(clients, "the clients are answered")

	drop(t, filepath.Join(dir, "locals.wasm"), bomb)
	eventually(t, "the dropped file is listed as failed to load", func() error {
		var list PluginsResponse
		call(t, ts, "GET", "/v1/plugins", nil).decode(t, &list)
		for _, p := range list.Plugins {
			if p.Name == "locals" {
				if p.Loaded || p.Error == "" {
					return fmt.Errorf("listed as %+v", p)
				}
				assert.Contains(t, p.Error, "locals", "the error says what is over the limit")
				assert.Contains(t, p.Error, "over the limit")
				return nil
			}
		}
		return errors.New("not listed yet")
	})
	answersAfter(served.Load()+2*clients, "the clients are still answered after the drop")
	select {
	case err := <-failures:
		t.Fatal(err)
	default:
	}
	var h Health
	call(t, ts, "GET", "/healthz", nil).decode(t, &h)
	assert.Equal(t, "ok", h.Status)
	assert.Equal(t, 1, h.Broken)
}
