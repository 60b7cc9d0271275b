// Package cstrategy holds the C strategy example; this test loads the
// committed outline.wasm through the host's plugin loader.
package cstrategy_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/wasm"
)

// outline.wasm is built from src/outline.c and sdk/c by `make examples`.
func open(t *testing.T) *plugin.Plugin {
	t.Helper()
	p, err := plugin.OpenWasmFile(context.Background(), "outline.wasm", plugin.Options{Wasm: wasm.Runtime, NoDiskCache: true})
	require.NoError(t, err, "load outline.wasm (make examples builds it)")
	t.Cleanup(func() { p.Close() })
	return p
}

// session has text that needs JSON escapes, a tool call and a result, so
// the SDK's reader and writer both get exercised.
func session() *abi.SummarizeRequest {
	return &abi.SummarizeRequest{
		Kind: abi.FoldHistory,
		Messages: []abi.Message{
			{ID: "m1", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Fix the \"flaky\" test in\tpkg/ü/\\x_test.go"}}},
			{ID: "m2", Role: abi.RoleAssistant, Content: []abi.Block{
				{Type: abi.BlockToolUse, ID: "t1", Name: "edit_file", Input: []byte(`{"path":"pkg/x_test.go"}`)},
				{Type: abi.BlockToolUse, ID: "t2", Name: "bash", Input: []byte(`{"cmd":"go test ./pkg"}`)},
				{Type: abi.BlockToolUse, ID: "t3", Name: "bash", Input: []byte(`{"cmd":"go vet"}`)},
			}},
			{ID: "m3", Role: abi.RoleUser, Content: []abi.Block{
				{Type: abi.BlockToolResult, ToolUseID: "t1", Text: "ok"},
				{Type: abi.BlockToolResult, ToolUseID: "t2", Text: "PASS"},
				{Type: abi.BlockToolResult, ToolUseID: "t3", Text: ""},
			}},
		},
		PreviousSummary: "The user works on\na Go service.",
		FileOps:         abi.FileOps{Read: []string{"go.mod"}, Modified: []string{"pkg/x_test.go", "docs/\"quoted\".md"}},
		TargetTokens:    300,
		Focus:           "the test",
	}
}

func TestOfflineOutline(t *testing.T) {
	p := open(t)
	assert.Equal(t, "outline", p.Info().Name)
	assert.Equal(t, []string{abi.KindStrategy}, p.Info().Kinds)
	// model_available true, but the host answers no_model: offline too.
	for _, modelAvailable := range []bool{false, true} {
		req := session()
		req.ModelAvailable = modelAvailable
		resp, err := p.Summarize(context.Background(), plugin.OfflineServices{}, req)
		require.NoError(t, err)
		assert.True(t, resp.Offline)
		for _, want := range []string{
			"- Latest request: Fix the \"flaky\" test in\tpkg/ü/\\x_test.go\n",
			"- Before: The user works on a Go service.\n",
			"- Tools: edit_file ×1, bash ×2\n",
			"- Modified `pkg/x_test.go`\n",
			"- Modified `docs/\"quoted\".md`\n",
			"- Focus: the test\n",
		} {
			assert.Contains(t, resp.Summary, want, "model_available=%v", modelAvailable)
		}
	}
}

// recordingModel answers every completion and keeps the requests.
type recordingModel struct {
	plugin.OfflineServices
	mu   sync.Mutex
	reqs []*abi.CompleteRequest
}

func (m *recordingModel) Complete(_ context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	return &abi.CompleteResponse{Text: "- asked to fix a test\n- «done»", Model: "test-model", Usage: abi.Usage{OutputTokens: 7}}, nil
}

func TestOutlineWithModel(t *testing.T) {
	p := open(t)
	model := &recordingModel{}
	req := session()
	req.ModelAvailable = true
	resp, err := p.Summarize(context.Background(), model, req)
	require.NoError(t, err)
	assert.False(t, resp.Offline)
	assert.Equal(t, "- asked to fix a test\n- «done»", resp.Summary)
	require.Len(t, model.reqs, 1)
	got := model.reqs[0]
	assert.Contains(t, got.System, "<transcript>")
	assert.Equal(t, 512, got.MaxTokens)
	require.Len(t, got.Messages, 1)
	require.Len(t, got.Messages[0].Content, 1)
	text := got.Messages[0].Content[0].Text
	for _, want := range []string{
		"Earlier summary, to merge:\nThe user works on\na Go service.",
		"Focus on: the test",
		"[user] Fix the \"flaky\" test in\tpkg/ü/\\x_test.go\n",
		`[assistant calls bash] {"cmd":"go vet"}`,
		"[result] PASS\n",
	} {
		assert.Contains(t, text, want)
	}
	assert.True(t, strings.HasSuffix(text, "</transcript>\n"), text)
}

func TestRefusesTruncate(t *testing.T) {
	_, err := open(t).Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: 10})
	var e *abi.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, abi.CodeUnsupported, e.Code)
}
