package realagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/internal/proxy"
	"github.com/compact-host/compact-host/internal/testwasm"
	"github.com/stretchr/testify/require"
)

// proxySummaryModel is the compaction model the rig's proxy asks for
// summaries; the scripted upstream tells its calls from the agent's by it.
const proxySummaryModel = "realagent-summary-model"

// proxySummary is the text of every summary the proxy's strategies get.
const proxySummary = "## Goal\nThe scripted task of the realagent test.\n## Progress\nPROXY-SUMMARY-4c1d: the earlier files were read."

var (
	registryOnce sync.Once
	registryVal  *plugin.Registry
	registryErr  error
)

// builtinRegistry holds the built-in strategies, compiled once for the
// test binary through the machine's shared wazero cache.
func builtinRegistry(t *testing.T) *plugin.Registry {
	t.Helper()
	registryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "realagent-plugins")
		if err != nil {
			registryErr = err
			return
		}
		cache, err := testwasm.ShareCompiled(filepath.Join(dir, "wazero"))
		if err != nil {
			registryErr = err
			return
		}
		registryVal, registryErr = plugin.NewRegistry(context.Background(), plugin.Options{
			Wasm: wasm.Runtime, Builtins: wasm.Builtins, Process: process.Runtime,
			PluginsDir: filepath.Join(dir, "plugins"), CacheDir: cache, NoWatch: true,
		})
	})
	require.NoError(t, registryErr)
	return registryVal
}

// block is one content block of a scripted answer.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// scriptedAnthropic is a loopback Messages API whose answers a test
// scripts: each agent call gets the blocks script returns for it, streamed
// with the API's event sequence; the proxy's summary calls get
// proxySummary. It records every request as received.
type scriptedAnthropic struct {
	t      *testing.T
	srv    *httptest.Server
	script func(n int, body []byte) []block

	mu        sync.Mutex
	agent     [][]byte
	summaries [][]byte
}

func newScriptedAnthropic(t *testing.T, script func(n int, body []byte) []block) *scriptedAnthropic {
	u := &scriptedAnthropic{t: t, script: script}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *scriptedAnthropic) calls() (agent, summaries [][]byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.agent...), append([][]byte(nil), u.summaries...)
}

func (u *scriptedAnthropic) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.Method != http.MethodPost || strings.TrimSuffix(r.URL.Path, "/") != "/v1/messages" {
		_, answer := jsonAnswer(http.StatusNotFound, map[string]any{"type": "error", "error": map[string]any{"type": "not_found_error", "message": "not found: " + r.URL.Path}})
		answer(w)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		_, answer := jsonAnswer(http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		answer(w)
		return
	}
	u.mu.Lock()
	var blocks []block
	if req.Model == proxySummaryModel {
		u.summaries = append(u.summaries, body)
		blocks = []block{{Type: "text", Text: proxySummary}}
	} else {
		n := len(u.agent)
		u.agent = append(u.agent, body)
		u.mu.Unlock()
		blocks = u.script(n, body)
		u.mu.Lock()
	}
	id := fmt.Sprintf("msg_scripted%04d", len(u.agent)+len(u.summaries))
	u.mu.Unlock()
	stop := "end_turn"
	for _, b := range blocks {
		if b.Type == "tool_use" {
			stop = "tool_use"
		}
	}
	in := inputTokens(body)
	usage := map[string]any{"input_tokens": in, "output_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !req.Stream {
		_, answer := jsonAnswer(http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		answer(w)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	for i, b := range blocks {
		start := map[string]any{"type": b.Type}
		var deltas []map[string]any
		switch b.Type {
		case "text":
			start["text"] = ""
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": b.Text})
		case "thinking":
			start["thinking"], start["signature"] = "", ""
			deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": b.Thinking},
				map[string]any{"type": "signature_delta", "signature": b.Signature})
		case "tool_use":
			start["id"], start["name"], start["input"] = b.ID, b.Name, map[string]any{}
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": string(b.Input)})
		}
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		for _, d := range deltas {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 20}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// proxyRig is a compact-host proxy on loopback in front of an upstream,
// behind a front that records what the agent sent.
type proxyRig struct {
	url  string
	logs *lockedBuffer

	mu   sync.Mutex
	sent [][]byte // the agent's model calls as it sent them
}

// lockedBuffer is a bytes.Buffer safe for the proxy's concurrent logging.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProxy runs a proxy with config in front of upstream, as
// `compact-host proxy --upstream <upstream> --compaction-model
// realagent-summary-model` with config's flags does; edit sets more
// options.
func startProxy(t *testing.T, upstream string, config host.Config, edit ...func(*proxy.Options)) *proxyRig {
	t.Helper()
	up, err := url.Parse(upstream)
	require.NoError(t, err)
	rig := &proxyRig{logs: &lockedBuffer{}}
	o := proxy.Options{Upstream: up, Config: config, Registry: builtinRegistry(t), CompactionModel: proxySummaryModel,
		Logger: slog.New(slog.NewJSONHandler(rig.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, e := range edit {
		e(&o)
	}
	p, err := proxy.New(o)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil && !strings.HasPrefix(r.URL.Path, proxy.AdminPrefix) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rig.mu.Lock()
			rig.sent = append(rig.sent, body)
			rig.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rig.url = srv.URL
	return rig
}

func (r *proxyRig) sentCalls() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.sent...)
}

// metric sums the samples of a series of the proxy's metrics whose name
// and labels start with series.
func (r *proxyRig) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := http.Get(r.url + proxy.AdminPrefix + "metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	total := 0.0
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, series); ok && rest != "" && strings.ContainsRune(" {,}", rune(rest[0])) {
			var v float64
			fields := strings.Fields(line)
			fmt.Sscan(fields[len(fields)-1], &v)
			total += v
		}
	}
	return total
}

// messagesOf splits a Messages request's messages into their raw bytes.
func messagesOf(t *testing.T, body []byte) []json.RawMessage {
	t.Helper()
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &req), "%.300s", body)
	return req.Messages
}

// sessionFile is the session file the agent keeps in its home.
func sessionFile(t *testing.T, run *Run) string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(run.Home, ".claude", "projects", "*", run.SessionID+".jsonl"))
	require.NoError(t, err)
	require.Len(t, found, 1, "the agent's session file")
	return found[0]
}
