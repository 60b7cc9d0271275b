package inprocess_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/inprocess"
	"github.com/compact-host/compact-host/host/plugin/wasm"
)

// A configuration that names a built-in works the same in process and
// with the embedded wasm modules.
func TestBuiltinsAreTheEmbeddedOnes(t *testing.T) {
	var names []string
	for _, p := range inprocess.Builtins(plugin.Options{}).Plugins() {
		assert.Equal(t, plugin.SourceInProcess, p.Source())
		names = append(names, p.Name())
	}
	assert.Equal(t, wasm.Builtins.Names(), names)
}

func TestLookups(t *testing.T) {
	ctx := context.Background()
	set := inprocess.Builtins(plugin.Options{})
	for _, name := range []string{"structured", "narrative", "truncate"} {
		p, err := set.Strategy(ctx, name)
		if assert.NoError(t, err, name) {
			assert.Equal(t, name, p.Name())
		}
	}
	_, err := set.Strategy(ctx, "nope")
	assert.ErrorIs(t, err, plugin.ErrNotFound)
	for _, category := range []string{"head-tail", "match-list", "file-content", "generic"} {
		p, err := set.Truncator(ctx, category)
		if assert.NoError(t, err, category) {
			assert.Equal(t, "truncate", p.Name(), category)
		}
	}
	_, err = set.Truncator(ctx, "structured")
	assert.ErrorIs(t, err, plugin.ErrNotFound, "a strategy's name is no category")
}

// The engine compacts and caps tool outputs with the in-process
// built-ins, offline.
func TestEngineWithBuiltinsInProcess(t *testing.T) {
	ctx := context.Background()
	eng, err := host.New(host.Config{ContextWindow: 8000, MaxOutputTokens: 1000, Tokenizer: "chars"},
		host.WithPlugins(inprocess.Builtins(plugin.Options{})), host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	sess, err := eng.OpenSession(filepath.Join(t.TempDir(), "run.jsonl"))
	require.NoError(t, err)
	defer sess.Close()
	for i := range 40 {
		require.NoError(t, sess.Append(host.Message{Role: abi.RoleUser, Content: []host.Block{{Type: abi.BlockText, Text: fmt.Sprintf("Step %d: fix the parser in host/parse%d.go. %s", i, i, strings.Repeat("detail ", 30))}}}))
		require.NoError(t, sess.Append(host.Message{Role: abi.RoleAssistant, Content: []host.Block{{Type: abi.BlockText, Text: fmt.Sprintf("Done with step %d. %s", i, strings.Repeat("note ", 30))}}}))
	}
	c, err := eng.Compact(ctx, sess, host.CompactOptions{Strategy: "structured"})
	require.NoError(t, err)
	assert.Equal(t, "structured", c.Strategy, "the strategy ran, no fallback")
	assert.True(t, c.Offline)
	assert.Contains(t, c.Summary, "parse", "the summary keeps the files")
	assert.Less(t, c.TokensAfter, c.TokensBefore)

	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "line %d: building package\n", i)
	}
	out := string(eng.TruncateToolOutput(ctx, "Bash", []byte(b.String()), 500))
	assert.LessOrEqual(t, eng.CountTokens(out), 500)
	assert.True(t, strings.HasPrefix(out, "line 0:"), "head-tail keeps the head")
	assert.Contains(t, out, "line 4999:", "head-tail keeps the tail")
}
