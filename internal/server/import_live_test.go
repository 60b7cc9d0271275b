package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/store"
)

// compactedCodexRollout is a Codex rollout the agent compacted: what it
// folded (the first answer, the developer message the rollout opened
// with) is no longer sent; its replacement history is.
const compactedCodexRollout = `{"timestamp":"2026-03-01T10:00:00.000Z","type":"session_meta","payload":{"id":"019f36b8-7808-7b53-b256-0000000000bb","timestamp":"2026-03-01T10:00:00.000Z","cwd":"/w","base_instructions":{"text":"You are Codex."}}}
{"timestamp":"2026-03-01T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>read-only</permissions instructions>"}]}}
{"timestamp":"2026-03-01T10:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the bug"}]}}
{"timestamp":"2026-03-01T10:00:03.000Z","type":"response_item","payload":{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"FOLDED-ANSWER"}]}}
{"timestamp":"2026-03-01T10:00:04.000Z","type":"compacted","payload":{"message":"","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the bug"}]},{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>full access</permissions instructions>"}]},{"type":"compaction","encrypted_content":"gAAAA"}]}}
{"timestamp":"2026-03-01T10:00:05.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"next question"}]}}
{"timestamp":"2026-03-01T10:00:06.000Z","type":"response_item","payload":{"type":"message","id":"m2","role":"assistant","content":[{"type":"output_text","text":"answer one"}]}}
`

// A session imported from an agent's file is the context the agent sends
// when it resumes (formats' Live), not the history it no longer sends.
func TestImportReadsTheLiveContext(t *testing.T) {
	ts := startWithStore(t, store.NewMemory())
	body, err := json.Marshal(map[string]any{"session": compactedCodexRollout})
	require.NoError(t, err)
	r := call(t, ts, http.MethodPut, "/v1/sessions/codex-resumed", json.RawMessage(body))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)

	file, err := formats.Read(strings.NewReader(compactedCodexRollout), "")
	require.NoError(t, err)
	texts := func(msgs []abi.Message) []string {
		var out []string
		for _, m := range msgs {
			for _, b := range m.Content {
				if b.Type == abi.BlockText {
					out = append(out, m.Role+": "+b.Text)
				}
			}
		}
		return out
	}
	got := texts(canonicalContext(t, getSession(t, ts, "codex-resumed", formats.Canonical)))
	assert.Equal(t, texts(file.Live()), got)
	assert.Equal(t, []string{"system: You are Codex.", "user: fix the bug", "system: <permissions instructions>full access</permissions instructions>",
		"user: next question", "assistant: answer one"}, got)
	assert.NotContains(t, strings.Join(got, "\n"), "FOLDED-ANSWER")
	assert.NotContains(t, strings.Join(got, "\n"), "read-only")
}
