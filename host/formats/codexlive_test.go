package formats

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// compactedRollout is a Codex rollout that the agent compacted: it opened
// with developer instructions, and its replacement history keeps newer
// ones after the user's messages, as Codex writes it, then goes on.
const compactedRollout = `{"timestamp":"2026-03-01T10:00:00.000Z","type":"session_meta","payload":{"id":"019f36b8-7808-7b53-b256-0000000000aa","timestamp":"2026-03-01T10:00:00.000Z","cwd":"/w","cli_version":"0.169.0","base_instructions":{"text":"You are Codex."}}}
{"timestamp":"2026-03-01T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>read-only</permissions instructions>"}]}}
{"timestamp":"2026-03-01T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions for /w"}]}}
{"timestamp":"2026-03-01T10:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the bug"}]}}
{"timestamp":"2026-03-01T10:00:03.000Z","type":"response_item","payload":{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"looking"}]}}
{"timestamp":"2026-03-01T10:00:04.000Z","type":"compacted","payload":{"message":"","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the bug"}]},{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>full access</permissions instructions>"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions for /w"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"and the tests"}]},{"type":"compaction","encrypted_content":"gAAAA"}]}}
{"timestamp":"2026-03-01T10:00:04.000Z","type":"event_msg","payload":{"type":"context_compacted"}}
{"timestamp":"2026-03-01T10:00:05.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"next question"}]}}
{"timestamp":"2026-03-01T10:00:06.000Z","type":"response_item","payload":{"type":"message","id":"m2","role":"assistant","content":[{"type":"output_text","text":"answer one"}]}}
{"timestamp":"2026-03-01T10:00:07.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"another question"}]}}
{"timestamp":"2026-03-01T10:00:08.000Z","type":"response_item","payload":{"type":"message","id":"m3","role":"assistant","content":[{"type":"output_text","text":"answer two"}]}}
`

// liveView is each message of msgs as its role, its pinned flag and its
// text.
func liveView(msgs []abi.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = fmt.Sprintf("%s pinned=%v %s", m.Role, m.Pinned, textOf(m.Content, abi.BlockText))
	}
	return out
}

// Codex goes on from its replacement history alone: of what came before
// it, only the base instructions are sent (as the request's
// instructions), not the developer message the rollout opened with. The
// developer instructions the replacement keeps after the user's messages
// are pinned.
func TestCodexLiveIsTheReplacementHistory(t *testing.T) {
	s, err := Read(strings.NewReader(compactedRollout), "")
	require.NoError(t, err)
	assert.Equal(t, []string{
		"system pinned=true You are Codex.",
		"user pinned=false fix the bug",
		"system pinned=true <permissions instructions>full access</permissions instructions>",
		"user pinned=false # AGENTS.md instructions for /w",
		"user pinned=false and the tests",
		"user pinned=false next question",
		"assistant pinned=false answer one",
		"user pinned=false another question",
		"assistant pinned=false answer two",
	}, liveView(s.Live()))
}

// A compaction of the live context keeps the developer instructions of
// Codex's replacement history wherever the cut falls: inside the
// replacement, or after it, or with nothing kept. Codex, resuming from
// the block, still has its permissions, and only once.
func TestAppendCompactionKeepsCodexPinnedInstructions(t *testing.T) {
	data := []byte(compactedRollout)
	s, err := Read(bytes.NewReader(data), "")
	require.NoError(t, err)
	live := s.Live()
	for _, firstKept := range []string{"and the tests", "next question", "another question", ""} {
		t.Run(firstKept, func(t *testing.T) {
			k := len(live)
			for i, m := range live {
				if textOf(m.Content, abi.BlockText) == firstKept {
					k = i
				}
			}
			block, err := AppendCompaction(data, writeBackFor(live, k, "SUMMARY"))
			require.NoError(t, err)
			after, err := Read(bytes.NewReader(append(append([]byte(nil), data...), block...)), "")
			require.NoError(t, err)
			got := liveView(after.Live())
			want := []string{
				"system pinned=true You are Codex.",
				"system pinned=true <permissions instructions>full access</permissions instructions>",
				"user pinned=false SUMMARY",
			}
			for _, m := range live[k:] {
				want = append(want, fmt.Sprintf("%s pinned=false %s", m.Role, textOf(m.Content, abi.BlockText)))
			}
			assert.Equal(t, want, got)
		})
	}
}
