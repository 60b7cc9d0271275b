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
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/internal/proxy"
	"github.com/compact-host/compact-host/internal/testwasm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scriptedResponses is a Responses API provider on loopback that plays a
// scripted task: each model call but the last is answered with an
// encrypted reasoning item and a shell call whose output is large, the
// last with the answer. It speaks HTTP with server-sent events and, when
// websockets is set, the WebSocket transport, where a request chained on
// previous_response_id extends the history held for that response. Every
// model call is recorded with the whole input it stands for.
type scriptedResponses struct {
	t          testing.TB
	srv        *httptest.Server
	websockets bool
	// steps is how many shell calls come before the answer.
	steps int

	mu    sync.Mutex
	calls []scriptedCall
	// summaries are the paths of the proxy's summary calls.
	summaries []string
	other     []string
	held      map[string][][]byte
	seq       int
}

// scriptedCall is one model call as it arrived.
type scriptedCall struct {
	WebSocket bool
	// Chained is the previous_response_id the call named.
	Chained string
	// Input is the whole input the call stands for, item by item.
	Input [][]byte
	// Tools are the names of the function tools it offered.
	Tools []string
}

// summaryModel is the model the proxy asks summaries of in these runs.
const summaryModel = "gpt-4.1-mini"

func newScriptedResponses(t testing.TB, websockets bool, steps int) *scriptedResponses {
	s := &scriptedResponses{t: t, websockets: websockets, steps: steps, held: map[string][][]byte{}}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scriptedResponses) modelCalls() []scriptedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]scriptedCall(nil), s.calls...)
}

func (s *scriptedResponses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect || r.URL.IsAbs() {
		s.mu.Lock()
		s.other = append(s.other, r.Method+" "+r.Host)
		s.mu.Unlock()
		http.Error(w, "no network beyond loopback", http.StatusForbidden)
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		if !s.websockets || path != "/v1/responses" {
			http.Error(w, `{"error":{"message":"WebSockets are not served here","type":"invalid_request_error"}}`, http.StatusUpgradeRequired)
			return
		}
		s.serveWS(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil || r.Method != http.MethodPost {
		s.mu.Lock()
		s.other = append(s.other, r.Method+" "+path)
		s.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	json.Unmarshal(body, &req)
	switch {
	case req.Model == summaryModel && path == "/v1/chat/completions":
		s.mu.Lock()
		s.summaries = append(s.summaries, path)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":20,"total_tokens":%d}}`,
			req.Model, scriptedSummary, len(body)/4, len(body)/4+20)
	case req.Model == summaryModel && path == "/v1/responses":
		s.mu.Lock()
		s.summaries = append(s.summaries, path)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		id := s.nextID("resp")
		item := fmt.Sprintf(`{"id":"msg_%s","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":%q}]}`, id, scriptedSummary)
		for _, ev := range []string{
			fmt.Sprintf(`{"type":"response.created","sequence_number":0,"response":{"id":%q,"object":"response","status":"in_progress","model":%q,"output":[]}}`, id, req.Model),
			fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":1,"output_index":0,"content_index":0,"item_id":"msg_%s","delta":%q}`, id, scriptedSummary),
			fmt.Sprintf(`{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":%s}`, item),
			fmt.Sprintf(`{"type":"response.completed","sequence_number":3,"response":{"id":%q,"object":"response","status":"completed","model":%q,"output":[%s],"usage":{"input_tokens":%d,"output_tokens":20,"total_tokens":%d}}}`, id, req.Model, item, len(body)/4, len(body)/4+20),
		} {
			writeSSE(w, ev)
		}
	case path == "/v1/responses":
		events := s.answer(false, body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			writeSSE(w, ev)
		}
	default:
		s.mu.Lock()
		s.other = append(s.other, r.Method+" "+path)
		s.mu.Unlock()
		http.NotFound(w, r)
	}
}

func writeSSE(w http.ResponseWriter, data string) {
	var head struct {
		Type string `json:"type"`
	}
	json.Unmarshal([]byte(data), &head)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", head.Type, data)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// scriptedSummary is what the proxy's summary calls are answered with.
const scriptedSummary = "## Goal\nList the numbers the scripted task asked for.\n## Progress\nThe earlier listings were read."

func (s *scriptedResponses) nextID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%s_script%03d", prefix, s.seq)
}

func (s *scriptedResponses) serveWS(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(maxBodyBytes)
	ctx := r.Context()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		for _, ev := range s.answer(true, data) {
			if err := c.Write(ctx, websocket.MessageText, []byte(ev)); err != nil {
				return
			}
		}
	}
}

// answer records one model call and returns its events.
func (s *scriptedResponses) answer(ws bool, body []byte) []string {
	var req struct {
		Model    string            `json:"model"`
		Previous string            `json:"previous_response_id"`
		Input    []json.RawMessage `json:"input"`
		Generate *bool             `json:"generate"`
		Tools    []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return []string{fmt.Sprintf(`{"type":"error","status":400,"error":{"type":"invalid_request_error","message":%q}}`, err.Error())}
	}
	id := s.nextID("resp")
	s.mu.Lock()
	call := scriptedCall{WebSocket: ws, Chained: req.Previous}
	if req.Previous != "" {
		h, ok := s.held[req.Previous]
		if !ok {
			s.mu.Unlock()
			return []string{`{"type":"error","status":400,"error":{"type":"invalid_request_error","code":"previous_response_not_found","message":"Previous response not found."}}`}
		}
		call.Input = append(call.Input, h...)
	}
	for _, it := range req.Input {
		call.Input = append(call.Input, []byte(it))
	}
	for _, tool := range req.Tools {
		call.Tools = append(call.Tools, tool.Name)
	}
	created := fmt.Sprintf(`{"type":"response.created","sequence_number":0,"response":{"id":%q,"object":"response","status":"in_progress","model":%q,"output":[]}}`, id, req.Model)
	if req.Generate != nil && !*req.Generate {
		// A warm-up: no output, and nothing recorded as a model call.
		s.held[id] = call.Input
		s.mu.Unlock()
		return []string{created, fmt.Sprintf(`{"type":"response.completed","sequence_number":1,"response":{"id":%q,"object":"response","status":"completed","model":%q,"output":[],"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0}}}`, id, req.Model)}
	}
	s.calls = append(s.calls, call)
	n := len(s.calls)
	s.mu.Unlock()

	size := 0
	for _, it := range call.Input {
		size += len(it)
	}
	reasoning := fmt.Sprintf(`{"id":"rs_script%03d","type":"reasoning","summary":[],"encrypted_content":"%s"}`, n, encryptedContent(n))
	var last string
	if n <= s.steps {
		last = shellCall(n, call.Tools)
	} else {
		last = fmt.Sprintf(`{"id":"msg_script%03d","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"All %d listings read."}]}`, n, s.steps)
	}
	s.mu.Lock()
	s.held[id] = append(append([][]byte(nil), call.Input...), []byte(reasoning), []byte(last))
	s.mu.Unlock()
	return []string{created,
		fmt.Sprintf(`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":%s}`, reasoning),
		fmt.Sprintf(`{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":%s}`, reasoning),
		fmt.Sprintf(`{"type":"response.output_item.added","sequence_number":3,"output_index":1,"item":%s}`, last),
		fmt.Sprintf(`{"type":"response.output_item.done","sequence_number":4,"output_index":1,"item":%s}`, last),
		fmt.Sprintf(`{"type":"response.completed","sequence_number":5,"response":{"id":%q,"object":"response","status":"completed","model":%q,"output":[%s,%s],"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":10},"total_tokens":%d}}}`,
			id, req.Model, reasoning, last, size/4, size/4+40),
	}
}

// encryptedContent is the opaque reasoning of call n, as a provider would
// send it: it must come back byte for byte.
func encryptedContent(n int) string {
	return fmt.Sprintf("gAAAAABscript%03d", n) + strings.Repeat("Zq9x", 30)
}

// shellCall is the n-th shell call, in the shape of the shell tool the
// agent offered: a listing of about 4 KB.
func shellCall(n int, tools []string) string {
	cmd := fmt.Sprintf("seq %d %d", n*10000, n*10000+700)
	name, args := "shell", map[string]any{"command": []string{"bash", "-lc", cmd}}
	for _, t := range tools {
		switch t {
		case "exec_command":
			name, args = t, map[string]any{"cmd": cmd}
		case "shell_command":
			name, args = t, map[string]any{"command": cmd}
		}
	}
	a, _ := json.Marshal(args)
	return fmt.Sprintf(`{"id":"fc_script%03d","type":"function_call","status":"completed","name":%q,"call_id":"call_script%03d","arguments":%q}`, n, name, n, a)
}

// runCodexExec runs the Codex CLI once, as a user would with the
// config.toml README shows: codex exec with openai_base_url at base.
func runCodexExec(t *testing.T, bin, base, prompt string) (stdout, stderr []byte) {
	dir := t.TempDir()
	home, work, tmp := filepath.Join(dir, "home"), filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
	for _, d := range []string{home, work, tmp} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	codexHome := filepath.Join(home, ".codex")
	require.NoError(t, os.MkdirAll(codexHome, 0o700))
	config := "openai_base_url = " + tomlString(base+"/v1") + "\n\n[analytics]\nenabled = false\n"
	require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
		"--model", "gpt-5.1-codex", prompt)
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp, "LANG=C.UTF-8", "NO_COLOR=1", "TERM=dumb",
		"CODEX_HOME=" + codexHome, "OPENAI_API_KEY=sk-realagent-dummy",
		"HTTP_PROXY=" + base, "HTTPS_PROXY=" + base, "ALL_PROXY=" + base,
		"http_proxy=" + base, "https_proxy=" + base, "all_proxy=" + base,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
	cmd.Stdin = strings.NewReader("")
	var out, errb capped
	out.max, errb.max = maxOutputBytes, maxOutputBytes
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	require.NoError(t, err, "codex exec\nstdout: %s\nstderr: %s", tail(out.Bytes()), tail(errb.Bytes()))
	return out.Bytes(), errb.Bytes()
}

// TestCodexThroughProxy runs the pinned Codex CLI through the proxy, over
// HTTP and over its WebSocket transport, on a scripted task of eleven
// model calls at a 32k window: the conversation is compacted once, by the
// structured strategy with its summary asked of the upstream's
// /v1/responses, every
// later call extends the compacted one byte for byte, the reasoning's
// encrypted_content arrives as the provider sent it, and over WebSocket
// every call but the compacted one goes chained on the previous response.
func TestCodexThroughProxy(t *testing.T) {
	bin := agentBin(t, Codex)
	// The built-in strategies, as compact-host proxy loads them: the
	// summary is asked of the upstream.
	dir := t.TempDir()
	cache, err := testwasm.ShareCompiled(filepath.Join(dir, "wazero"))
	require.NoError(t, err)
	registry, err := plugin.NewRegistry(context.Background(), plugin.Options{
		Wasm: wasm.Runtime, Builtins: wasm.Builtins, Process: process.Runtime,
		PluginsDir: filepath.Join(dir, "plugins"), CacheDir: cache, NoWatch: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { registry.Close() })
	for _, ws := range []bool{false, true} {
		name := "http"
		if ws {
			name = "websocket"
		}
		t.Run(name, func(t *testing.T) {
			const steps = 10
			up := newScriptedResponses(t, ws, steps)
			upURL, err := url.Parse(up.srv.URL)
			require.NoError(t, err)
			var logs bytes.Buffer
			var logMu sync.Mutex
			p, err := proxy.New(proxy.Options{Upstream: upURL, Config: host.Config{ContextWindow: 32000, KeepRecentTokens: 4000},
				Registry: registry, CompactionModel: summaryModel,
				Logger: slog.New(slog.NewJSONHandler(writerFunc(func(b []byte) (int, error) {
					logMu.Lock()
					defer logMu.Unlock()
					return logs.Write(b)
				}), &slog.HandlerOptions{Level: slog.LevelDebug}))})
			require.NoError(t, err)
			t.Cleanup(func() { p.Close() })
			front := httptest.NewServer(p)
			t.Cleanup(front.Close)

			stdout, _ := runCodexExec(t, bin, front.URL, "List the numbers with the shell tool, one listing at a time, until told to stop.")
			assert.Contains(t, string(stdout), fmt.Sprintf("All %d listings read.", steps))

			calls := up.modelCalls()
			require.Len(t, calls, steps+1, "one call per shell call and one for the answer")
			t.Logf("tools offered: %v", calls[0].Tools)
			compacted := -1
			for n := 1; n < len(calls); n++ {
				prev, cur := calls[n-1].Input, calls[n].Input
				extends := len(cur) > len(prev) && slices.EqualFunc(cur[:len(prev)], prev, bytes.Equal)
				if extends {
					if ws {
						assert.NotEmpty(t, calls[n].Chained, "call %d went whole over the WebSocket though nothing was folded", n+1)
					}
					continue
				}
				require.Equal(t, -1, compacted, "call %d is a second compaction (the first at call %d)", n+1, compacted+1)
				compacted = n
				assert.Less(t, len(cur), len(prev)+2, "call %d shrank", n+1)
				if ws {
					assert.Empty(t, calls[n].Chained, "the compacted call %d went chained", n+1)
				}
				t.Logf("compacted at call %d of %d: %d items to %d", n+1, len(calls), len(prev)+2, len(cur))
			}
			require.Positive(t, compacted, "the conversation was never compacted")
			for _, c := range calls {
				assert.Equal(t, ws, c.WebSocket, "the transport")
			}
			// Every reasoning item the agent sent back is the provider's,
			// byte for byte.
			seen := 0
			for _, c := range calls {
				for _, it := range c.Input {
					var item struct {
						Type, ID         string
						EncryptedContent string `json:"encrypted_content"`
					}
					require.NoError(t, json.Unmarshal(it, &item))
					if item.Type != "reasoning" {
						continue
					}
					var k int
					_, err := fmt.Sscanf(item.ID, "rs_script%03d", &k)
					require.NoError(t, err, "reasoning item %s", it)
					assert.Equal(t, encryptedContent(k), item.EncryptedContent)
					seen++
				}
			}
			assert.Positive(t, seen, "no reasoning item came back")
			// The summary was asked of the upstream's Responses API, and the
			// structured strategy, not the emergency path, folded the turns.
			up.mu.Lock()
			summaries := append([]string(nil), up.summaries...)
			up.mu.Unlock()
			require.NotEmpty(t, summaries, "no summary call")
			for _, p := range summaries {
				assert.Equal(t, "/v1/responses", p, "a summary call of a Responses conversation")
			}
			logMu.Lock()
			assert.Regexp(t, `"msg":"compacted"[^\n]*"strategy":"structured","offline":false`, logs.String())
			logMu.Unlock()
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
