package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawResponse keeps the bodies' JSON values as sent.
type rawResponse struct {
	Session  json.RawMessage `json:"session"`
	Messages json.RawMessage `json:"messages"`
	System   json.RawMessage `json:"system"`
	Context  *struct {
		Messages json.RawMessage `json:"messages"`
		System   json.RawMessage `json:"system"`
	} `json:"context"`
	Report CompactReport `json:"report"`
}

func TestCompactReturnsTheContextAsMessages(t *testing.T) {
	_, ts := start(t, nil)
	msgs := codingSession(21, 8, 600)
	msgs[0].Pinned = true // the system prompt outlives the compaction
	for _, format := range []string{formats.Canonical, formats.Anthropic, formats.OpenAI} {
		t.Run(format, func(t *testing.T) {
			var got rawResponse
			call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, "canonical", msgs), OutputFormat: format}).decode(t, &got)
			require.Equal(t, "compacted", got.Report.Action)
			require.NotEmpty(t, got.Messages, "messages is returned")
			require.Equal(t, byte('['), got.Messages[0], "messages is an array: %s", got.Messages)
			want := contextOf(t, format, got.Session)

			switch format {
			case formats.Canonical:
				var ctx []abi.Message
				require.NoError(t, json.Unmarshal(got.Messages, &ctx))
				assert.Equal(t, want, ctx, "the messages are the context the session log replays to")
				assert.Len(t, ctx, got.Report.Kept)
				assert.Equal(t, abi.RoleSystem, ctx[0].Role, "the system prompt stays in the messages")
				assert.Empty(t, got.System, "canonical messages carry the system prompt themselves")
			case formats.Anthropic:
				var req map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(got.Session, &req))
				assert.JSONEq(t, string(req["messages"]), string(got.Messages))
				assert.JSONEq(t, string(req["system"]), string(got.System))
				assert.Contains(t, string(got.System), "careful coding agent")
				// system and messages make the request the session holds.
				var b bytes.Buffer
				require.NoError(t, json.NewEncoder(&b).Encode(map[string]json.RawMessage{"system": got.System, "messages": got.Messages}))
				s, err := formats.Read(&b, formats.Anthropic)
				require.NoError(t, err)
				assert.Equal(t, want, s.Messages)
			case formats.OpenAI:
				var req map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(got.Session, &req))
				assert.JSONEq(t, string(req["messages"]), string(got.Messages))
				assert.Empty(t, got.System, "openai keeps system messages among the messages")
				var ctx []map[string]any
				require.NoError(t, json.Unmarshal(got.Messages, &ctx))
				assert.Equal(t, "system", ctx[0]["role"])
			}
			require.NoError(t, host.Validate(want, false))
			assert.Contains(t, string(got.Messages), "Turn 7 is done", "the newest reply is among the messages")
		})
	}
}

func TestCompactMessagesKeepTheRequestsBytes(t *testing.T) {
	_, ts := start(t, nil)
	var b bytes.Buffer
	require.NoError(t, formats.Write(&b, formats.Anthropic, codingSession(22, 8, 600)))
	var req map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &req))
	// The newest message carries a breakpoint the writer knows nothing of.
	list := req["messages"].([]any)
	last := list[len(list)-1].(map[string]any)
	blocks := last["content"].([]any)
	blocks[0].(map[string]any)["cache_control"] = map[string]any{"type": "ephemeral"}
	req["model"] = "claude-sonnet-4-5"
	session, err := json.Marshal(req)
	require.NoError(t, err)

	var got rawResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session}).decode(t, &got)
	require.Equal(t, "compacted", got.Report.Action)
	require.Equal(t, formats.Anthropic, got.Report.OutputFormat)
	var out []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(got.Messages, &out))
	require.NotEmpty(t, out)
	assert.Contains(t, string(out[len(out)-1]["content"]), `"cache_control":{"type":"ephemeral"}`, "the block's fields stay")
	assert.NotContains(t, string(got.Messages), `"model"`, "messages are the array, not the request")
}

func TestMessagesAbsentWithoutASession(t *testing.T) {
	_, ts := start(t, nil)
	session := encode(t, formats.OpenAI, codingSession(23, 8, 600))

	var dry rawResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session, Options: CompactOptions{DryRun: true}}).decode(t, &dry)
	assert.Equal(t, "plan", dry.Report.Action)
	assert.Empty(t, dry.Session)
	assert.Empty(t, dry.Messages, "a dry run returns no messages")

	var measured rawResponse
	r := call(t, ts, "POST", "/v1/check", CheckRequest{Session: session})
	r.decode(t, &measured)
	assert.Nil(t, measured.Context, "a check without apply returns no context")
	assert.False(t, strings.Contains(string(r.Body), `"context"`), "%s", r.Body)

	var applied rawResponse
	call(t, ts, "POST", "/v1/check", CheckRequest{Session: session, Apply: true, Options: EngineOptions{ContextWindow: 12000}}).decode(t, &applied)
	require.NotNil(t, applied.Context, "a check with apply returns the context")
	var req map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(applied.Session, &req))
	assert.JSONEq(t, string(req["messages"]), string(applied.Context.Messages))
	assert.Empty(t, applied.Context.System)
}
