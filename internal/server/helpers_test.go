package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/internal/testwasm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The built-in plugins are wasm; compiling them takes seconds, so the
// test binary shares one compilation cache and one registry.
var (
	cacheDir string
	registry *plugin.Registry
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "server-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The CLI puts its cache under <cache_dir>/wazero: the serve command's
	// test shares this one.
	if cacheDir, err = testwasm.ShareCompiled(filepath.Join(dir, "wazero")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	registry, err = plugin.NewRegistry(context.Background(), plugin.Options{
		Wasm: wasm.Runtime, Builtins: wasm.Builtins, Process: process.Runtime,
		PluginsDir: filepath.Join(dir, "plugins"), CacheDir: cacheDir, NoWatch: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer registry.Close()
	return m.Run()
}

// testConfig is a small window, so modest sessions need compacting, and
// the chars/4 counter, so figures are easy to reason about.
var testConfig = host.Config{ContextWindow: 20000, MaxOutputTokens: 2000, Tokenizer: "chars"}

// start serves a Server on a loopback listener for the test.
func start(t testing.TB, edit func(*Options)) (*Server, *httptest.Server) {
	t.Helper()
	opts := Options{Config: testConfig, Registry: registry, Version: "test", Logger: slog.New(slog.DiscardHandler)}
	if edit != nil {
		edit(&opts)
	}
	s, err := New(opts)
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

// response is an answer as the client sees it.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// errorBody is the error object of an answer.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    int    `json:"line"`
}

func (r response) err(t testing.TB) errorBody {
	t.Helper()
	var b struct{ Error *errorBody }
	require.NoError(t, json.Unmarshal(r.Body, &b), "status %d: not JSON: %s", r.Status, r.Body)
	require.NotNil(t, b.Error, "status %d: not an error body: %s", r.Status, r.Body)
	return *b.Error
}

func (r response) decode(t testing.TB, v any) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.NoError(t, json.Unmarshal(r.Body, v), "decode %s", r.Body)
}

// call sends method path with body (any: marshalled; string or []byte:
// sent as is) and returns the answer.
func call(t testing.TB, ts *httptest.Server, method, path string, body any, header ...string) response {
	t.Helper()
	r, err := do(ts, method, path, body, header...)
	require.NoError(t, err)
	return r
}

// do is call for goroutines other than the test's.
func do(ts *httptest.Server, method, path string, body any, header ...string) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(data)
	}
	// A hang guard, not a speed requirement.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// Sessions.

func text(role, s string) abi.Message {
	return abi.Message{Role: role, Content: []abi.Block{{Type: abi.BlockText, Text: s}}}
}

// filler is text of about n chars/4 tokens.
func filler(tag string, n int) string {
	var b strings.Builder
	for b.Len() < n*4 {
		fmt.Fprintf(&b, "%s line %d of output\n", tag, b.Len())
	}
	return b.String()
}

// codingSession is a coding agent's session: a system prompt, then turns
// of a request, replies with tool calls (parallel reads and edits) and
// their results of about resultTokens each. seed varies the content.
func codingSession(seed, turns, resultTokens int) []abi.Message {
	msgs := []abi.Message{text(abi.RoleSystem, "You are a careful coding agent. Run the tests before you say you are done.")}
	for turn := 0; turn < turns; turn++ {
		msgs = append(msgs, text(abi.RoleUser, fmt.Sprintf("session %d turn %d: fix the failing test in pkg%d/handler_test.go", seed, turn, turn)))
		for step := 0; step < 2; step++ {
			a, b := fmt.Sprintf("s%d_t%d_%d_read", seed, turn, step), fmt.Sprintf("s%d_t%d_%d_edit", seed, turn, step)
			readIn, _ := json.Marshal(map[string]any{"file_path": fmt.Sprintf("pkg%d/file%d.go", turn, step)})
			editIn, _ := json.Marshal(map[string]any{"file_path": fmt.Sprintf("pkg%d/edit%d.go", turn, step), "old_string": "x", "new_string": "y"})
			msgs = append(msgs, abi.Message{Role: abi.RoleAssistant, Content: []abi.Block{
				{Type: abi.BlockText, Text: "Let me look at the code first."},
				{Type: abi.BlockToolUse, ID: a, Name: "Read", Input: readIn},
				{Type: abi.BlockToolUse, ID: b, Name: "Edit", Input: editIn},
			}})
			msgs = append(msgs, abi.Message{Role: abi.RoleUser, Content: []abi.Block{
				{Type: abi.BlockToolResult, ToolUseID: a, Text: filler(fmt.Sprintf("s%d-read-%d-%d", seed, turn, step), resultTokens)},
				{Type: abi.BlockToolResult, ToolUseID: b, Text: "The file was edited."},
			}})
		}
		msgs = append(msgs, text(abi.RoleAssistant, fmt.Sprintf("Turn %d is done: the test passes now because the handler checks the nil case.", turn)))
	}
	return msgs
}

// encode renders msgs as a request's "session" value in format:
// anthropic and openai as objects, "canonical" as an array, "jsonl" as a
// string of canonical lines, "log" as a string holding a session log.
func encode(t testing.TB, format string, msgs []abi.Message) json.RawMessage {
	t.Helper()
	var b bytes.Buffer
	switch format {
	case formats.Anthropic, formats.OpenAI:
		require.NoError(t, formats.Write(&b, format, msgs))
		return b.Bytes()
	case "canonical":
		data, err := json.Marshal(msgs)
		require.NoError(t, err)
		return data
	case "jsonl":
		require.NoError(t, formats.Write(&b, formats.Canonical, msgs))
	case "log":
		for i := range msgs {
			m := msgs[i]
			if m.ID == "" {
				m.ID = fmt.Sprintf("m%d", i+1)
			}
			line, err := json.Marshal(host.Entry{Type: host.EntryMessage, Message: &m})
			require.NoError(t, err)
			b.Write(line)
			b.WriteByte('\n')
		}
	default:
		require.FailNow(t, "encode: no such format", format)
	}
	data, err := json.Marshal(b.String())
	require.NoError(t, err)
	return data
}

// contextOf reads a returned session in format and returns the context it
// gives a model: for canonical, the session log replayed by an engine.
func contextOf(t testing.TB, format string, session json.RawMessage) []abi.Message {
	t.Helper()
	msgs, err := readContext(format, session)
	require.NoError(t, err)
	return msgs
}

func readContext(format string, session json.RawMessage) ([]abi.Message, error) {
	if format != formats.Canonical {
		s, err := formats.Read(bytes.NewReader(session), format)
		if err != nil {
			return nil, fmt.Errorf("read the returned %s session: %w", format, err)
		}
		return s.Messages, nil
	}
	s, err := loadReturnedLog(session)
	if err != nil {
		return nil, err
	}
	return s.Context(), nil
}

// replay loads a returned session log into an engine's session.
func replay(t testing.TB, session json.RawMessage) *host.Session {
	t.Helper()
	s, err := loadReturnedLog(session)
	require.NoError(t, err)
	return s
}

func loadReturnedLog(session json.RawMessage) (*host.Session, error) {
	var log string
	if err := json.Unmarshal(session, &log); err != nil {
		return nil, fmt.Errorf("canonical session is not a JSON string: %w", err)
	}
	f, err := os.CreateTemp("", "returned-*.jsonl")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(log)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	e, err := host.New(testConfig)
	if err != nil {
		return nil, err
	}
	s, err := e.LoadSession(f.Name())
	if err != nil {
		return nil, fmt.Errorf("replay the returned log: %w", err)
	}
	if s.Torn() != nil {
		return nil, fmt.Errorf("the returned log has a torn line: %v", s.Torn())
	}
	return s, nil
}

// eventually retries f until it succeeds; the bound is a hang guard.
func eventually(t testing.TB, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		require.False(t, time.Now().After(deadline), "%s: %v", what, err)
		time.Sleep(20 * time.Millisecond)
	}
}

// repoRoot is the directory of go.mod above the test's directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("no go.mod above the test directory")
		}
		dir = parent
	}
}

// wantError checks that r is an error answer with status and code, and
// returns its error object.
func (r response) wantError(t testing.TB, status int, code string) errorBody {
	t.Helper()
	e := r.err(t)
	assert.Equal(t, status, r.Status, "%s", r.Body)
	assert.Equal(t, code, e.Code, "%s", e.Message)
	return e
}

// wantStatus checks the status of r.
func (r response) wantStatus(t testing.TB, status int) {
	t.Helper()
	require.Equal(t, status, r.Status, "%s", r.Body)
}
