package server

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/host/store"
)

// TestAnswersNeverNameServerPaths drives every error of the API a client
// can cause on a server whose store fails and whose plugins directory
// holds broken plugins, and checks that no answer names a file of the
// server: the store's 503 used to quote the store's directory, and the
// plugin list the plugins directory and each plugin's path. The server's
// log keeps the paths.
func TestAnswersNeverNameServerPaths(t *testing.T) {
	root := t.TempDir()
	storeDir, pluginsDir := filepath.Join(root, "store"), filepath.Join(root, "plugins")
	require.NoError(t, os.MkdirAll(pluginsDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pluginsDir, "broken.wasm"), []byte("not wasm"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(pluginsDir, "gone"+plugin.ManifestSuffix),
		[]byte(`{"command": "`+filepath.Join(root, "no-such-plugin")+`"}`), 0o644))
	reg, err := plugin.NewRegistry(context.Background(), plugin.Options{Wasm: wasm.Runtime, Builtins: wasm.Builtins,
		Process: process.Runtime, PluginsDir: pluginsDir, CacheDir: cacheDir, NoWatch: true, HandshakeTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })
	st, err := store.OpenDisk(storeDir, store.DiskOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	var logs syncBuffer
	_, ts := start(t, func(o *Options) {
		o.Registry, o.Store = reg, st
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})

	conv := codingSession(21, 2, 200)
	session := encode(t, "canonical", conv[:2])
	putSession(t, ts, "kept", conv[:2])
	// The store's sessions directory becomes a file: every session call
	// fails inside the store, with errors that name its files.
	sessions := filepath.Join(storeDir, "sessions")
	require.NoError(t, os.RemoveAll(sessions))
	require.NoError(t, os.WriteFile(sessions, nil, 0o644))

	home, _ := os.UserHomeDir()
	private := []string{root, storeDir, pluginsDir, os.TempDir() + "/"}
	if home != "" && home != "/" {
		private = append(private, home+"/")
	}
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"put into a failing store", http.MethodPut, "/v1/sessions/s2", map[string]any{"session": session}, http.StatusServiceUnavailable},
		{"get from a failing store", http.MethodGet, "/v1/sessions/kept", nil, http.StatusServiceUnavailable},
		{"append to a failing store", http.MethodPost, "/v1/sessions/kept/messages", map[string]any{"messages": messagesIn(t, "canonical", conv[2:4])}, http.StatusServiceUnavailable},
		{"delete from a failing store", http.MethodDelete, "/v1/sessions/kept", nil, http.StatusServiceUnavailable},
		{"plugin list with broken plugins", http.MethodGet, "/v1/plugins", nil, http.StatusOK},
		{"health", http.MethodGet, "/healthz", nil, http.StatusOK},
		{"a broken plugin as strategy", http.MethodPost, "/v1/compact", map[string]any{"session": session, "options": map[string]any{"strategy": "broken"}}, http.StatusBadRequest},
		{"a missing process plugin as strategy", http.MethodPost, "/v1/compact", map[string]any{"session": session, "options": map[string]any{"strategy": "gone"}}, http.StatusBadRequest},
		{"no such endpoint", http.MethodGet, "/v1/nothing" + root, nil, http.StatusNotFound},
		{"a path as session ID", http.MethodGet, "/v1/sessions/" + root, nil, http.StatusBadRequest},
		{"wrong method", http.MethodPatch, "/v1/compact", nil, http.StatusMethodNotAllowed},
		{"bad JSON", http.MethodPost, "/v1/compact", "{", http.StatusBadRequest},
		{"a session of a path", http.MethodPost, "/v1/compact", map[string]any{"session": root}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := call(t, ts, tc.method, tc.path, tc.body)
			require.Equal(t, tc.status, resp.Status, "%s", resp.Body)
			for _, p := range private {
				assert.NotContains(t, string(resp.Body), p, "the answer names a server path")
			}
		})
	}
	assert.Contains(t, logs.String(), storeDir, "the log says where the store failed")
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
