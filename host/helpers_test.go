package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin"
)

func user(text string) Message {
	return Message{Role: abi.RoleUser, Content: []Block{{Type: abi.BlockText, Text: text}}}
}

func assistant(text string, calls ...Block) Message {
	m := Message{Role: abi.RoleAssistant}
	if text != "" {
		m.Content = append(m.Content, Block{Type: abi.BlockText, Text: text})
	}
	m.Content = append(m.Content, calls...)
	return m
}

func call(id, name string, input map[string]any) Block {
	raw, _ := json.Marshal(input)
	return Block{Type: abi.BlockToolUse, ID: id, Name: name, Input: raw}
}

func result(id, text string) Block {
	return Block{Type: abi.BlockToolResult, ToolUseID: id, Text: text}
}

func results(rs ...Block) Message { return Message{Role: abi.RoleUser, Content: rs} }

// filler is text of about n chars/4 tokens.
func filler(tag string, n int) string {
	var b strings.Builder
	for b.Len() < n*4 {
		fmt.Fprintf(&b, "%s line %d of output\n", tag, b.Len())
	}
	return b.String()
}

// recorder is a strategy that records its requests and answers with a
// summary naming what it was given.
type recorder struct {
	mu   sync.Mutex
	reqs []*abi.SummarizeRequest
	fail error
}

func (r *recorder) Summarize(_ context.Context, _ plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	if r.fail != nil {
		return nil, r.fail
	}
	return &abi.SummarizeResponse{Summary: fmt.Sprintf("SUMMARY(%s) of %d messages; previous=[%s]", req.Kind, len(req.Messages), req.PreviousSummary), Offline: !req.ModelAvailable}, nil
}

func (r *recorder) calls() []*abi.SummarizeRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*abi.SummarizeRequest(nil), r.reqs...)
}

func newEngine(t testing.TB, cfg Config, opts ...Option) *Engine {
	t.Helper()
	if cfg.ContextWindow == 0 {
		cfg.ContextWindow = 20000
		cfg.MaxOutputTokens = 2000
	}
	if cfg.Tokenizer == "" {
		cfg.Tokenizer = "chars"
	}
	e, err := New(cfg, append([]Option{WithLogger(discardLogger)}, opts...)...)
	require.NoError(t, err)
	return e
}

// coding appends a realistic coding session: turns of a request, a
// thinking reply with tool calls (some parallel, with results spread over
// two messages) and their results.
func coding(t testing.TB, s *Session, turns, resultTokens int) {
	t.Helper()
	for turn := 0; turn < turns; turn++ {
		must(t, s.Append(user(fmt.Sprintf("turn %d: please fix the failing test in pkg%d", turn, turn))))
		for step := 0; step < 3; step++ {
			a, b := fmt.Sprintf("t%d_%d_a", turn, step), fmt.Sprintf("t%d_%d_b", turn, step)
			must(t, s.Append(assistant("Let me look.", call(a, "Read", map[string]any{"file_path": fmt.Sprintf("pkg%d/file%d.go", turn, step)}),
				call(b, "Edit", map[string]any{"file_path": fmt.Sprintf("pkg%d/edit%d.go", turn, step), "old_string": "x", "new_string": "y"}))))
			must(t, s.Append(results(result(a, filler("read", resultTokens)))))
			must(t, s.Append(results(result(b, "edited"))))
		}
		must(t, s.Append(assistant(fmt.Sprintf("Done with turn %d.", turn))))
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	require.NoError(t, err)
}

var discardLogger = slog.New(slog.DiscardHandler)
