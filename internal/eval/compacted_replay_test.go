package eval

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/formats"
)

// claudeCodeWork is a Claude Code session of turns of: a request, a read
// with a long result, and a closing reply.
func claudeCodeWork(turns int) []byte {
	var b bytes.Buffer
	n, parent := 0, "null"
	line := func(typ, msg string) {
		uuid := fmt.Sprintf("c0de0000-0000-4000-8000-%012d", n)
		fmt.Fprintf(&b, `{"parentUuid":%s,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"c0de0000-0000-4000-8000-ffffffffffff","version":"2.1.332","type":%q,"message":%s,"uuid":%q,"timestamp":"2030-05-01T10:%02d:%02d.000Z"}`+"\n",
			parent, typ, msg, uuid, n/60, n%60)
		parent, n = fmt.Sprintf("%q", uuid), n+1
	}
	for i := range turns {
		call := fmt.Sprintf("toolu_%04d", i)
		line("user", fmt.Sprintf(`{"role":"user","content":"Step %d: port the parser change to w%d.go"}`, i, i))
		line("assistant", fmt.Sprintf(`{"id":"msg_%da","role":"assistant","content":[{"type":"tool_use","id":%q,"name":"Read","input":{"file_path":"/src/r%d.go"}}]}`, i, call, i))
		line("user", fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":%q}]}`, call, strings.Repeat(fmt.Sprintf("line of r%d.go\n", i), 100)))
		line("assistant", fmt.Sprintf(`{"id":"msg_%db","role":"assistant","content":[{"type":"text","text":"Step %d done."}]}`, i, i))
	}
	return b.Bytes()
}

// An eval replays the whole history a file holds, as the agent lived it:
// a file with a compaction written into it (compact --in-place) replays
// as the same file without it, while its live context is smaller.
func TestReplayOfACompactedFileIsTheSame(t *testing.T) {
	data := claudeCodeWork(30)
	s, err := formats.Read(bytes.NewReader(data), "")
	require.NoError(t, err)
	block, err := formats.AppendCompaction(data, formats.WriteBack{Summary: "Steps 0 to 19 ported the parser change.", FirstKeptID: s.Messages[80].ID})
	require.NoError(t, err)
	dir := t.TempDir()
	plain, compacted := filepath.Join(dir, "plain.jsonl"), filepath.Join(dir, "compacted.jsonl")
	require.NoError(t, os.WriteFile(plain, data, 0o600))
	require.NoError(t, os.WriteFile(compacted, append(append([]byte(nil), data...), block...), 0o600))

	_, plainInfo, err := loadSession(plain)
	require.NoError(t, err)
	_, info, err := loadSession(compacted)
	require.NoError(t, err)
	assert.Equal(t, 1, info.AgentCompactions)
	assert.Equal(t, plainInfo.Messages, info.Messages)
	assert.Equal(t, plainInfo.Tokens, info.Tokens)
	assert.Less(t, info.LiveTokens, plainInfo.LiveTokens, "the live context is the compacted one")

	rep, err := Run(ctx, Options{Sessions: []string{plain, compacted}, Windows: []int{8000}, Strategies: []string{"truncate"}, InProcess: true})
	require.NoError(t, err)
	require.Len(t, rep.Runs, 2)
	a, b := rep.Runs[0], rep.Runs[1]
	require.NotEmpty(t, a.Compactions, "the replay compacts")
	assert.Equal(t, a.Calls, b.Calls)
	assert.Equal(t, a.Gates, b.Gates)
	assert.Equal(t, a.ValidGates, b.ValidGates)
	assert.Equal(t, a.TokensBefore, b.TokensBefore)
	assert.Equal(t, a.TokensAfter, b.TokensAfter)
	require.Len(t, b.Compactions, len(a.Compactions))
	for i := range a.Compactions {
		assert.Equal(t, a.Compactions[i].Call, b.Compactions[i].Call, "compaction %d", i)
		assert.Equal(t, a.Compactions[i].Cut, b.Compactions[i].Cut, "compaction %d", i)
		assert.Equal(t, a.Compactions[i].MessagesFolded, b.Compactions[i].MessagesFolded, "compaction %d", i)
	}
}
