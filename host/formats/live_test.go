package formats

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// appendTo is data with a compaction of its second half appended.
func appendTo(t *testing.T, data []byte) []byte {
	t.Helper()
	s, err := Read(bytes.NewReader(data), "")
	require.NoError(t, err)
	k := cutAt(t, s.Messages, len(s.Messages)/2)
	block, err := AppendCompaction(data, writeBackFor(s.Messages, k, "the summary"))
	require.NoError(t, err)
	return append(append([]byte(nil), data...), block...)
}

// A block names the bytes it was appended to: FindAppended finds it from
// the file alone, reads it as ours, and notices when the bytes before it
// or the block itself changed, or the agent wrote after it.
func TestFindAppended(t *testing.T) {
	for _, name := range []string{"claude-code.jsonl", "codex.jsonl"} {
		t.Run(name, func(t *testing.T) {
			orig := fixture(t, name)
			// Claude Code names the session on every line.
			orig = bytes.ReplaceAll(orig, []byte(`"isSidechain":false,`), []byte(`"isSidechain":false,"sessionId":"s1",`))
			_, err := FindAppended(orig)
			assert.ErrorIs(t, err, ErrNoBlock)

			data := appendTo(t, orig)
			b, err := FindAppended(data)
			require.NoError(t, err)
			assert.Equal(t, int64(len(orig)), b.Offset)
			assert.Equal(t, int64(len(data)), b.End)
			assert.Equal(t, bytes.Count(orig, []byte("\n"))+1, b.Line)

			s, err := Read(bytes.NewReader(data), "")
			require.NoError(t, err)
			last := s.AgentCompactions[len(s.AgentCompactions)-1]
			assert.True(t, last.Ours)
			require.NotNil(t, last.AppendedTo)
			assert.Equal(t, int64(len(orig)), last.AppendedTo.PrefixLength)
			assert.Equal(t, b.Line, last.Line)
			assert.Equal(t, int(b.End-b.Offset), last.Bytes, "the compaction's size is its block's")

			// Compacted again: the latest block is found, after the first.
			twice := appendTo(t, data)
			b2, err := FindAppended(twice)
			require.NoError(t, err)
			assert.Equal(t, int64(len(data)), b2.Offset)

			// The agent wrote after the block: it no longer ends the file.
			after := append(append([]byte(nil), data...), []byte(`{"type":"later"}`+"\n")...)
			b, err = FindAppended(after)
			require.NoError(t, err)
			assert.Less(t, b.End, int64(len(after)))

			// A byte before the block changed.
			edited := append([]byte(nil), data...)
			edited[10] ^= 0x01
			_, err = FindAppended(edited)
			assert.ErrorIs(t, err, ErrBlockChanged)

			// A byte of the block after its first record changed.
			edited = append([]byte(nil), data...)
			edited[len(edited)-3] ^= 0x01
			_, err = FindAppended(edited)
			assert.ErrorIs(t, err, ErrBlockChanged)
		})
	}
}

// The member's name inside an agent's text is not a block of ours.
func TestFindAppendedIgnoresTheNameInText(t *testing.T) {
	data := append(fixture(t, "claude-code.jsonl"),
		[]byte(`{"type":"user","uuid":"x1","message":{"role":"user","content":"look: {\"compact_host_appended\":{\"prefix_length\":0}}"}}`+"\n")...)
	_, err := FindAppended(data)
	assert.ErrorIs(t, err, ErrNoBlock)
}
