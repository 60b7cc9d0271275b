package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/recall"
)

// The summary names the recall tools only when the client says the agent
// has them; its markers are there either way.
func TestCompactRecallHint(t *testing.T) {
	_, ts := start(t, nil)
	msgs := codingSession(1, 8, 600)
	for _, hint := range []bool{false, true} {
		var got CompactResponse
		call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, formats.Canonical, msgs), Options: CompactOptions{RecallHint: hint}}).decode(t, &got)
		require.Equal(t, "compacted", got.Report.Action)
		var sent []abi.Message
		require.NoError(t, json.Unmarshal(got.Messages, &sent))
		var summary string
		for _, m := range sent {
			if m.Summary {
				summary = m.Text()
			}
		}
		require.NotEmpty(t, summary, "no summary message in the answer")
		assert.NotEmpty(t, abi.MarkersIn(summary), "the summary carries no marker")
		assert.Equal(t, hint, strings.Contains(summary, recall.Hint), "recall_hint %v", hint)
	}
}
