package plugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

var smallSession = &abi.SummarizeRequest{
	Kind: abi.FoldHistory,
	Messages: []abi.Message{
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Fix the failing test in parser.go"}}},
		{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "I changed parser.go to handle empty input."}}},
	},
	FileOps:      abi.FileOps{Modified: []string{"parser.go"}},
	TargetTokens: 200,
}

func TestThreeTransportsAgree(t *testing.T) {
	ctx := context.Background()
	wasm, err := OpenWasm(ctx, testplugWasm(t), "testplug.wasm", testOptions(t, nil))
	require.NoError(t, err)
	defer wasm.Close()
	proc, err := StartProcess(ctx, Manifest{Command: build(t, "testplug", false, "-X main.hostile=yes")}, testOptions(t, nil))
	require.NoError(t, err)
	defer proc.Close()

	var want string
	for _, p := range []*Plugin{wasm, proc} {
		resp, err := p.Summarize(ctx, nil, smallSession)
		require.NoError(t, err, p.Source())
		assert.True(t, resp.Offline, p.Source())
		assert.Contains(t, resp.Summary, "parser.go", p.Source())
		if want == "" {
			want = resp.Summary
		} else {
			assert.Equal(t, want, resp.Summary, "%s summary differs", p.Source())
		}
		_, err = p.Truncate(ctx, nil, &abi.TruncateRequest{Category: "no-such-category", Content: []byte("x"), MaxTokens: 5})
		assert.ErrorIs(t, err, ErrPluginError, p.Source())
		var abiErr *abi.Error
		if assert.ErrorAs(t, err, &abiErr, p.Source()) {
			assert.Equal(t, abi.CodeUnsupported, abiErr.Code, p.Source())
		}
	}
}

func TestErrorsNameThePlugin(t *testing.T) {
	p, err := OpenWasm(context.Background(), hostileWasm(t, "trap"), "/plugins/trap.wasm", testOptions(t, nil))
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: 1})
	var pe *Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, ErrTrap, pe.Kind)
	assert.Equal(t, "trap", pe.Plugin)
	assert.Equal(t, "/plugins/trap.wasm", pe.Path)
	assert.Equal(t, "truncate", pe.Op)
	assert.Contains(t, err.Error(), `plugin "trap" (/plugins/trap.wasm): truncate: plugin trapped`)
}

func TestClosedPluginRefusesCalls(t *testing.T) {
	p, err := OpenWasm(context.Background(), hostileWasm(t, "mirror"), "", testOptions(t, nil))
	require.NoError(t, err)
	p.Close()
	_, err = p.Summarize(context.Background(), nil, smallSession)
	assert.ErrorIs(t, err, ErrClosed)
}

func TestOpenDispatchesOnFileName(t *testing.T) {
	dir := t.TempDir()
	bin := build(t, "testplug", false, "-X main.hostile=yes")
	manifest := filepath.Join(dir, "tp"+ManifestSuffix)
	require.NoError(t, os.WriteFile(manifest, []byte(`{"command": "`+bin+`"}`), 0o644))
	p, err := Open(context.Background(), manifest, testOptions(t, nil))
	require.NoError(t, err)
	defer p.Close()
	assert.Equal(t, SourceProcess, p.Source())
	assert.Equal(t, "testplug", p.Name())
	_, err = Open(context.Background(), filepath.Join(dir, "notes.txt"), testOptions(t, nil))
	assert.ErrorIs(t, err, ErrInvalidPlugin)
}

func TestHandshakeFailureIsBounded(t *testing.T) {
	opts := testOptions(t, nil)
	opts.HandshakeTimeout = 300 * time.Millisecond
	_, err := StartProcess(context.Background(), Manifest{Command: build(t, "nohandshake", false, "")}, opts)
	assert.ErrorIs(t, err, ErrHandshake)
}

// A wasm plugin that loops in its start code fails to load at the call
// timeout, even when the caller's context has no deadline.
func TestLoadOfALoopingPluginIsBounded(t *testing.T) {
	opts := testOptions(t, nil)
	opts.CallTimeout = 200 * time.Millisecond
	_, err := OpenWasm(context.Background(), hostileWasm(t, "initloop"), "initloop.wasm", opts)
	assert.ErrorIs(t, err, ErrDeadlineExceeded)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "initloop.wasm", "the error names the file")
}
