package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/recall"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/mcptest"
	"github.com/compact-host/compact-host/internal/recallstore"
)

// keptConversation stores, as the proxy does, the originals of a
// conversation of n tool calls opened by opening, and returns its ID and
// marker key.
func keptConversation(t *testing.T, ss store.Sessions, tenant, opening string, n int) (string, recall.Key) {
	t.Helper()
	msgs := []abi.Message{{ID: "anthropic-0", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: opening}}}}
	for i := range n {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			abi.Message{ID: fmt.Sprintf("anthropic-%d", 2*i+1), Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, ID: id, Name: "Bash", Input: []byte(`{}`)}}},
			abi.Message{ID: fmt.Sprintf("anthropic-%d", 2*i+2), Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: id, Text: fmt.Sprintf("kept-%s-%d\n", opening, i) + strings.Repeat("y", 1500)}}})
	}
	key, ok := recall.KeyFor(msgs)
	require.True(t, ok)
	sum := sha256.Sum256([]byte(tenant + opening))
	conv := hex.EncodeToString(sum[:])
	w := recallstore.Write{Tenant: tenant, Conversation: conv, Keys: []recall.Key{key}, Messages: msgs, Through: len(msgs)}
	for i := range msgs {
		w.Positions = append(w.Positions, i)
	}
	_, err := recallstore.Keep(context.Background(), ss, w)
	require.NoError(t, err)
	return conv, key
}

// compact-host mcp --store DIR --conversation ID serves what the proxy
// kept of that conversation, and only of it.
func TestMCPServesAProxyConversationFromTheStore(t *testing.T) {
	dir := t.TempDir()
	disk, err := store.OpenDisk(dir, store.DiskOptions{})
	require.NoError(t, err)
	mine, key := keptConversation(t, disk, "tenant-a", "mine", 6)
	_, theirs := keptConversation(t, disk, "tenant-b", "theirs", 6)
	require.NoError(t, disk.Close())

	cs := mcpClient(t, "--store", dir, "--conversation", mine)
	text, isErr := mcptest.Call(t, cs, "recall", map[string]any{"ref": "[recall:" + key.ToolRef("call_4") + "]"})
	require.False(t, isErr, text)
	assert.Contains(t, text, "kept-mine-4\n")
	text, isErr = mcptest.Call(t, cs, "recall", map[string]any{"ref": key.SpanRef("anthropic-1", "anthropic-4")})
	require.False(t, isErr, text)
	assert.Contains(t, text, "kept-mine-1\n")
	text, isErr = mcptest.Call(t, cs, "search", map[string]any{"query": "kept-mine-5"})
	require.False(t, isErr, text)
	assert.Contains(t, text, key.ToolRef("call_5"))
	// Another tenant's conversation's markers, and references that are
	// no marker, name nothing of it.
	for _, ref := range []string{theirs.ToolRef("call_4"), theirs.SpanRef("anthropic-1", "anthropic-4"), "t-../../etc/passwd", "../" + mine, strings.Repeat("t-0", 100000)} {
		text, isErr = mcptest.Call(t, cs, "recall", map[string]any{"ref": ref})
		assert.True(t, isErr, "%.40s: %s", ref, text)
		assert.NotContains(t, text, "kept-")
	}
}

func TestMCPRefusesAConversationItCannotRead(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{"../../etc/passwd", "recall-tenant/x", strings.Repeat("A", 64), strings.Repeat("0", 65)} {
		r := runCLI(t, runOpts{}, "mcp", "--store", dir, "--conversation", bad)
		assert.Equal(t, ExitUsage, r.code, "%s: %s", bad, r.stderr)
		assert.Contains(t, r.stderr, "64 hex digits")
	}
	r := runCLI(t, runOpts{}, "mcp", "--store", dir, "--conversation", strings.Repeat("ab", 32))
	assert.Equal(t, ExitInput, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no originals are kept")
	r = runCLI(t, runOpts{}, "mcp", "--store", dir)
	assert.Equal(t, ExitUsage, r.code, r.stderr)
	r = runCLI(t, runOpts{}, "mcp", "--session-file", "x.jsonl", "--conversation", strings.Repeat("ab", 32))
	assert.Equal(t, ExitUsage, r.code, r.stderr)
}
