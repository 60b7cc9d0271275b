// Package assemblyscript holds the AssemblyScript example plugins; this
// test loads the committed headtail.wasm and digest.wasm through the
// host's plugin loader.
package assemblyscript_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/wasm"
)

// The modules are built from truncator.ts and strategy.ts by `make examples`.
func open(t *testing.T, file string) *plugin.Plugin {
	t.Helper()
	p, err := plugin.OpenWasmFile(context.Background(), file, plugin.Options{Wasm: wasm.Runtime, NoDiskCache: true})
	require.NoError(t, err, "load %s (make examples builds it)", file)
	t.Cleanup(func() { p.Close() })
	return p
}

func TestHeadTail(t *testing.T) {
	p := open(t, "headtail.wasm")
	assert.Equal(t, []string{"head-tail", "generic"}, p.Info().Categories)

	var in bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&in, "line %d: naïve ✓\n", i)
	}
	resp, err := p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "head-tail", Content: in.Bytes(), MaxTokens: 100})
	require.NoError(t, err)
	out := string(resp.Content)
	assert.LessOrEqual(t, len(out), 400)
	assert.True(t, utf8.ValidString(out))
	assert.True(t, strings.HasPrefix(out, "line 0: naïve ✓\nline 1:"), out)
	assert.True(t, strings.HasSuffix(out, "line 999: naïve ✓\n"), out)
	assert.True(t, resp.Truncated)
	assert.Contains(t, out, fmt.Sprintf("[... %d lines (%d bytes) omitted by headtail", resp.OmittedLines, resp.OmittedBytes))
	assert.Equal(t, in.Len(), len(out)-len(notice(out))+int(resp.OmittedBytes))

	small := []byte("fits\n")
	resp, err = p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "generic", Content: small, MaxTokens: 10})
	require.NoError(t, err)
	assert.False(t, resp.Truncated)
	assert.Equal(t, small, resp.Content)

	_, err = p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "generic", Content: small, MaxTokens: 0})
	var e *abi.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, abi.CodeInvalidRequest, e.Code)
}

// notice returns the omission line of a truncated output.
func notice(out string) string {
	i := strings.Index(out, "[... ")
	j := strings.Index(out[i:], "]\n")
	return out[i : i+j+2]
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
	return &abi.CompleteResponse{Text: "- fixed the \"flaky\" test", Model: "test-model"}, nil
}

func session() *abi.SummarizeRequest {
	return &abi.SummarizeRequest{
		Kind: abi.FoldHistory,
		Messages: []abi.Message{
			{ID: "m1", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Fix the \"flaky\" test\nin pkg/ü"}}},
			{ID: "m2", Role: abi.RoleAssistant, Content: []abi.Block{
				{Type: abi.BlockToolUse, ID: "t1", Name: "edit_file", Input: []byte(`{"path":"pkg/x_test.go"}`)},
				{Type: abi.BlockToolUse, ID: "t2", Name: "bash", Input: []byte(`{"cmd":"go test"}`)},
			}},
			{ID: "m3", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "t2", Text: "PASS"}}},
		},
		PreviousSummary: "A Go service.",
		FileOps:         abi.FileOps{Modified: []string{"pkg/x_test.go"}},
		TargetTokens:    1000,
	}
}

func TestDigest(t *testing.T) {
	p := open(t, "digest.wasm")
	resp, err := p.Summarize(context.Background(), nil, session())
	require.NoError(t, err)
	assert.True(t, resp.Offline)
	for _, want := range []string{
		"- Latest request: Fix the \"flaky\" test in pkg/ü\n",
		"- Before: A Go service.\n",
		"- Tools: edit_file ×1, bash ×1\n",
		"- Modified `pkg/x_test.go`\n",
	} {
		assert.Contains(t, resp.Summary, want)
	}

	model := &recordingModel{}
	req := session()
	req.ModelAvailable = true
	resp, err = p.Summarize(context.Background(), model, req)
	require.NoError(t, err)
	assert.False(t, resp.Offline)
	assert.Equal(t, "- fixed the \"flaky\" test", resp.Summary)
	require.Len(t, model.reqs, 1)
	assert.Equal(t, 1000, model.reqs[0].MaxTokens)
	require.Len(t, model.reqs[0].Messages, 1)
	text := model.reqs[0].Messages[0].Content[0].Text
	assert.Contains(t, text, "[user] Fix the \"flaky\" test\nin pkg/ü\n")
	assert.Contains(t, text, `[assistant calls bash] {"cmd":"go test"}`)
	assert.Contains(t, text, "[result] PASS\n")
}
