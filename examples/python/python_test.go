// Package python holds the Python example plugins; this test starts them
// as process plugins through the host's loader, as a user's host would.
package python_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/examples/internal/pygrpc"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
)

func open(t *testing.T, manifest string) *plugin.Plugin {
	t.Helper()
	pygrpc.Require(t)
	p, err := plugin.Open(context.Background(), manifest, plugin.Options{Process: process.Runtime, NoDiskCache: true})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	require.Equal(t, plugin.SourceProcess, p.Source())
	return p
}

func TestLoglines(t *testing.T) {
	p := open(t, "loglines.plugin.json")
	assert.Equal(t, []string{"build-log", "generic"}, p.Info().Categories)
	var in bytes.Buffer
	for i := range 2000 {
		switch i {
		case 700:
			in.WriteString("pkg/x_test.go:12: FAIL: TestFlaky: got 2, want 3\n")
		case 1500:
			in.WriteString("panic: runtime error: index out of range [5] with length 3 ✗\n")
		default:
			fmt.Fprintf(&in, "=== RUN TestCase%04d ok\n", i)
		}
	}
	resp, err := p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "build-log", Content: in.Bytes(), MaxTokens: 150})
	require.NoError(t, err)
	out := string(resp.Content)
	assert.LessOrEqual(t, len(out), 600)
	assert.True(t, resp.Truncated)
	assert.Contains(t, out, "FAIL: TestFlaky: got 2, want 3\n")
	assert.Contains(t, out, "panic: runtime error: index out of range [5] with length 3 ✗\n")
	assert.True(t, strings.HasPrefix(out, "=== RUN TestCase0000 ok\n"), out)
	assert.Contains(t, out, "=== RUN TestCase1999 ok\n")
	assert.Less(t, strings.Index(out, "TestFlaky"), strings.Index(out, "panic:"), "lines keep their order")
	assert.Equal(t, 2000-strings.Count(out, "\n")+1+strings.Count(out, "lines omitted]"), int(resp.OmittedLines))

	_, err = p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: -1})
	var e *abi.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, abi.CodeInvalidRequest, e.Code)
}

type recordingModel struct {
	plugin.OfflineServices
	mu   sync.Mutex
	reqs []*abi.CompleteRequest
}

func (m *recordingModel) Complete(_ context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	return &abi.CompleteResponse{Text: "- recap of «the fix»\n", Model: "test-model"}, nil
}

func session() *abi.SummarizeRequest {
	return &abi.SummarizeRequest{
		Kind: abi.FoldHistory,
		Messages: []abi.Message{
			{ID: "m1", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Make the \"deploy\" step\nidempotent"}}},
			{ID: "m2", Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, ID: "t1", Name: "edit_file", Input: []byte(`{"path":"deploy.sh"}`)}}},
			{ID: "m3", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "t1", Text: "edited"}}},
		},
		PreviousSummary: "Ops repo.",
		FileOps:         abi.FileOps{Modified: []string{"deploy.sh"}},
		TargetTokens:    100,
		Focus:           "deploys",
	}
}

// TestRecap runs the strategy offline and with a model: the model call
// goes back to the host over go-plugin's broker, the path the SDK's Host
// implements.
func TestRecap(t *testing.T) {
	p := open(t, "recap.plugin.json")
	resp, err := p.Summarize(context.Background(), nil, session())
	require.NoError(t, err)
	assert.True(t, resp.Offline)
	assert.Equal(t, "- (offline: no model was available)\n"+
		"- Latest request: Make the \"deploy\" step idempotent\n"+
		"- Before: Ops repo.\n"+
		"- Tools: edit_file ×1\n"+
		"- Modified `deploy.sh`\n"+
		"- Focus: deploys\n", resp.Summary)

	model := &recordingModel{}
	req := session()
	req.ModelAvailable = true
	resp, err = p.Summarize(context.Background(), model, req)
	require.NoError(t, err)
	assert.False(t, resp.Offline)
	assert.Equal(t, "- recap of «the fix»\n", resp.Summary)
	require.Len(t, model.reqs, 1)
	got := model.reqs[0]
	assert.Equal(t, 512, got.MaxTokens)
	require.Len(t, got.Messages, 1)
	require.Len(t, got.Messages[0].Content, 1)
	text := got.Messages[0].Content[0].Text
	assert.Contains(t, text, "Earlier summary, to merge:\nOps repo.")
	assert.Contains(t, text, "[user] Make the \"deploy\" step\nidempotent\n")
	assert.Contains(t, text, `[assistant calls edit_file] {"path": "deploy.sh"}`+"\n")
	assert.Contains(t, text, "[result] edited\n")

	// With no model the host answers no_model and the plugin goes offline.
	resp, err = p.Summarize(context.Background(), plugin.OfflineServices{}, req)
	require.NoError(t, err)
	assert.True(t, resp.Offline)
}
