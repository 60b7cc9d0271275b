package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/openai/openai-go/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testKey = "sk-ant-api03-proxytest-SECRET-4f9c2a71"

// turnText is a user turn of about 400 tokens, distinct per turn.
func turnText(i int) string {
	return fmt.Sprintf("Turn %d: please look at parser_%d.go and fix the bug. ", i, i) +
		strings.Repeat(fmt.Sprintf("detail %d of the failing case; ", i), 55)
}

// checkFaithful checks one turn: the upstream got every byte the client
// sent outside messages, and the client's messages with at most a prefix
// replaced. It returns the replacement (nil when nothing was replaced).
func checkFaithful(t *testing.T, sent, got []byte) []json.RawMessage {
	t.Helper()
	return checkFaithfulIn(t, "messages", sent, got)
}

// checkFaithfulIn is checkFaithful for a request whose conversation is
// under key.
func checkFaithfulIn(t *testing.T, key string, sent, got []byte) []json.RawMessage {
	t.Helper()
	if bytes.Equal(sent, got) {
		return nil
	}
	s, g := topLevel(t, sent), topLevel(t, got)
	require.Equal(t, len(s), len(g), "top-level fields")
	for k, v := range s {
		if k == key {
			continue
		}
		assert.Equal(t, string(v), string(g[k]), "field %s changed", k)
	}
	sm, gm := rawArray(t, key, sent), rawArray(t, key, got)
	require.Less(t, len(gm), len(sm)+1)
	// The kept messages are the client's last ones, byte for byte.
	var kept int
	for kept = 0; kept < len(gm) && kept < len(sm); kept++ {
		if !bytes.Equal(sm[len(sm)-1-kept], gm[len(gm)-1-kept]) {
			break
		}
	}
	require.Less(t, kept, len(sm), "messages changed but none was folded")
	repl := gm[:len(gm)-kept]
	require.NotEmpty(t, repl, "messages changed beyond the folded prefix")
	return repl
}

// checkValid reads the rewritten request as the API's format and checks
// the provider rules: tool calls with their results, a user message first.
func checkValid(t *testing.T, format string, body []byte) {
	t.Helper()
	sess, err := formats.Read(bytes.NewReader(body), format)
	require.NoError(t, err)
	assert.Empty(t, sess.Repaired, "the rewritten request needed repairs")
	assert.NoError(t, host.Validate(sess.Messages, false))
}

// checkConversation checks a whole scripted conversation through the
// proxy: compacted exactly once, after which every request carries the
// same replacement bytes.
func checkConversation(t *testing.T, r *rig, format, model string, turns int) {
	t.Helper()
	sent, got := r.front.requests(), r.up.agentRequests()
	require.Len(t, sent, turns)
	require.Len(t, got, turns)
	var first []json.RawMessage
	compactedAt := -1
	for i := range sent {
		repl := checkFaithful(t, sent[i].Body, got[i].Body)
		if repl == nil {
			require.Nil(t, first, "turn %d went uncompacted after turn %d was compacted", i, compactedAt)
			continue
		}
		checkValid(t, format, got[i].Body)
		if first == nil {
			first, compactedAt = repl, i
			assert.Contains(t, string(repl[len(repl)-1]), "Context compacted")
			continue
		}
		require.Equal(t, len(first), len(repl), "turn %d", i)
		for k := range first {
			assert.Equal(t, string(first[k]), string(repl[k]), "turn %d: replacement message %d differs", i, k)
		}
	}
	require.NotNil(t, first, "the conversation was never compacted")
	assert.Less(t, compactedAt, turns-2, "too few turns after the compaction to show it is reused")
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, "compact_host_proxy_compactions_total"))
	assert.Equal(t, float64(turns-compactedAt-1), metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="spliced"`))
	sums := r.up.summaryRequests()
	require.NotEmpty(t, sums)
	for _, s := range sums {
		assert.Equal(t, model, mustModel(t, s.Body))
	}
	t.Logf("compacted at turn %d of %d; %d summary calls", compactedAt, turns, len(sums))
}

func mustModel(t *testing.T, body []byte) string {
	var v struct {
		Model string `json:"model"`
	}
	require.NoError(t, json.Unmarshal(body, &v))
	return v.Model
}

func TestAnthropicSDKConversation(t *testing.T) {
	r := newRig(t, nil)
	client := anthropic.NewClient(aoption.WithBaseURL(r.srv.URL), aoption.WithAPIKey(testKey), aoption.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name: "read_file", Description: anthropic.String("Read a file"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}},
	}}}
	var history []anthropic.MessageParam
	const turns = 14
	for i := range turns {
		history = append(history, anthropic.NewUserMessage(anthropic.NewTextBlock(turnText(i))))
		if i%4 == 1 {
			// A tool round trip inside the turn.
			id := fmt.Sprintf("toolu_%02d", i)
			history = append(history,
				anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(id, map[string]any{"path": fmt.Sprintf("parser_%d.go", i)}, "read_file")),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, fmt.Sprintf("package parser // file %d", i), false)))
		}
		params := anthropic.MessageNewParams{
			Model: "claude-sonnet-4-5", MaxTokens: 2000, Messages: history, Tools: tools,
			System:      []anthropic.TextBlockParam{{Text: "You are a careful coding agent."}},
			Metadata:    anthropic.MetadataParam{UserID: anthropic.String("user-42")},
			Thinking:    anthropic.ThinkingConfigParamOfEnabled(1024),
			Temperature: anthropic.Float(1),
		}
		opts := []aoption.RequestOption{aoption.WithJSONSet("x_future_field", map[string]any{"keep": []int{1, 2}})}
		var reply anthropic.Message
		if i%2 == 0 {
			stream := client.Messages.NewStreaming(ctx, params, opts...)
			for stream.Next() {
				require.NoError(t, reply.Accumulate(stream.Current()))
			}
			require.NoError(t, stream.Err(), "turn %d", i)
		} else {
			m, err := client.Messages.New(ctx, params, opts...)
			require.NoError(t, err, "turn %d", i)
			reply = *m
		}
		require.Len(t, reply.Content, 1)
		assert.Equal(t, fmt.Sprintf("reply %d", i+1), reply.Content[0].Text)
		history = append(history, reply.ToParam())
	}
	checkConversation(t, r, formats.Anthropic, summaryModel, turns)
	for _, s := range r.up.summaryRequests() {
		assert.Equal(t, testKey, s.Header.Get("X-Api-Key"), "summary calls carry the client's key")
		assert.Equal(t, "/v1/messages", s.Path)
	}
	assert.NotContains(t, r.logs.String(), testKey)
	assert.NotContains(t, r.logs.String(), "failing case", "logs carry no content")
}

func TestOpenAISDKConversation(t *testing.T) {
	r := newRig(t, func(o *Options) { o.CompactionModel = "gpt-4.1-mini" })
	const key = "sk-proj-openai-proxytest-SECRET-77aa"
	client := openai.NewClient(ooption.WithBaseURL(r.srv.URL+"/v1"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()
	tools := []openai.ChatCompletionToolParam{{Function: shared.FunctionDefinitionParam{
		Name: "read_file", Description: openai.String("Read a file"),
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
	}}}
	history := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a careful coding agent.")}
	const turns = 14
	for i := range turns {
		history = append(history, openai.UserMessage(turnText(i)))
		if i%4 == 1 {
			id := fmt.Sprintf("call_%02d", i)
			history = append(history,
				openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
					ToolCalls: []openai.ChatCompletionMessageToolCallParam{{ID: id, Function: openai.ChatCompletionMessageToolCallFunctionParam{
						Name: "read_file", Arguments: fmt.Sprintf(`{"path":"parser_%d.go"}`, i)}}},
				}},
				openai.ToolMessage(fmt.Sprintf("package parser // file %d", i), id))
		}
		params := openai.ChatCompletionNewParams{
			Model: "gpt-4o", Messages: history, Tools: tools, MaxCompletionTokens: openai.Int(2000),
			Temperature: openai.Float(0.2), Metadata: shared.Metadata{"run": "42"}, User: openai.String("user-42"),
		}
		opts := []ooption.RequestOption{ooption.WithJSONSet("x_future_field", map[string]any{"keep": []int{1, 2}})}
		var text string
		if i%2 == 0 {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := client.Chat.Completions.NewStreaming(ctx, params, opts...)
			acc := openai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			require.NoError(t, stream.Err(), "turn %d", i)
			require.NotEmpty(t, acc.Choices)
			text = acc.Choices[0].Message.Content
		} else {
			c, err := client.Chat.Completions.New(ctx, params, opts...)
			require.NoError(t, err, "turn %d", i)
			text = c.Choices[0].Message.Content
		}
		assert.Equal(t, fmt.Sprintf("reply %d", i+1), text)
		history = append(history, openai.AssistantMessage(text))
	}
	checkConversation(t, r, formats.OpenAI, "gpt-4.1-mini", turns)
	for _, s := range r.up.summaryRequests() {
		assert.Equal(t, "Bearer "+key, s.Header.Get("Authorization"))
		assert.Equal(t, "/v1/chat/completions", s.Path)
	}
	// The system message stays first, as the client sent it.
	last := r.up.agentRequests()[turns-1]
	assert.Equal(t, string(rawMessages(t, r.front.requests()[turns-1].Body)[0]), string(rawMessages(t, last.Body)[0]))
	assert.NotContains(t, r.logs.String(), key)
}
