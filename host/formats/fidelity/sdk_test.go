package fidelity_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/openai/openai-go/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
)

// These tests record the request bodies the providers' official Go SDKs
// send, on a loopback server that answers as the provider would, and check
// that formats keeps them whole: read and written with nothing folded, a
// request is the same bytes; compacted, it keeps every top-level field and
// every kept message's bytes.

// recorder is a loopback provider that keeps every request body.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
}

const maxRecordedBody = 16 << 20

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRecordedBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec.mu.Lock()
	rec.bodies = append(rec.bodies, body)
	rec.mu.Unlock()
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	anthropicAPI := strings.HasSuffix(r.URL.Path, "/v1/messages")
	switch {
	case anthropicAPI && req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`message_start`, `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`,
			`content_block_start`, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta`, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`,
			`content_block_stop`, `{"type":"content_block_stop","index":0}`,
			`message_delta`, `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}`,
			`message_stop`, `{"type":"message_stop"}`,
		} {
			if strings.HasPrefix(ev, "{") {
				fmt.Fprintf(w, "data: %s\n\n", ev)
			} else {
				fmt.Fprintf(w, "event: %s\n", ev)
			}
		}
	case anthropicAPI:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`)
	case req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}
}

func (rec *recorder) last(t *testing.T) []byte {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotEmpty(t, rec.bodies, "the SDK sent no request")
	return rec.bodies[len(rec.bodies)-1]
}

// toolOutput is a tool result long enough that a few of them need a
// compaction.
func toolOutput(i int) string {
	return strings.Repeat(fmt.Sprintf("line %d of the listing: a.txt b.txt c.txt\n", i), 30)
}

const pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// anthropicParams is a conversation that uses every kind of content Claude
// Code sends: system blocks with cache_control, tools, thinking with
// signatures, redacted thinking, images, a document with citations,
// parallel tool calls answered in one user message, a result made of
// blocks, cache_control on a result.
func anthropicParams(rounds int) anthropic.MessageNewParams {
	var msgs []anthropic.MessageParam
	for i := 0; i < rounds; i++ {
		user := anthropic.NewUserMessage(anthropic.NewTextBlock(fmt.Sprintf("step %d: list and size /tmp <b>&</b>", i)))
		if i == 0 {
			user.Content = append(user.Content,
				anthropic.NewImageBlockBase64("image/png", pngBase64),
				anthropic.ContentBlockParamUnion{OfDocument: &anthropic.DocumentBlockParam{
					Source:    anthropic.DocumentBlockParamSourceUnion{OfText: &anthropic.PlainTextSourceParam{Data: "The plan: list, then size."}},
					Title:     anthropic.String("plan.txt"),
					Citations: anthropic.CitationsConfigParam{Enabled: anthropic.Bool(true)},
				}})
		}
		ls, du := fmt.Sprintf("toolu_ls_%d", i), fmt.Sprintf("toolu_du_%d", i)
		assistant := anthropic.NewAssistantMessage(
			anthropic.NewThinkingBlock(fmt.Sprintf("EqQBCkYIBxgCKkD%d+sig/==", i), "List, then size; both at once."),
			anthropic.NewRedactedThinkingBlock("EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"),
			anthropic.NewTextBlock("Checking."),
			anthropic.NewToolUseBlock(ls, map[string]any{"path": "/tmp", "all": true, "depth": 1.5e0}, "ls"),
			anthropic.NewToolUseBlock(du, map[string]any{"path": "/tmp"}, "du"),
		)
		results := anthropic.NewUserMessage(
			anthropic.NewToolResultBlock(ls, toolOutput(i), false),
			anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{
				ToolUseID: du,
				IsError:   anthropic.Bool(false),
				Content: []anthropic.ToolResultBlockParamContentUnion{
					{OfText: &anthropic.TextBlockParam{Text: "8K\t/tmp"}},
					{OfImage: &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{MediaType: "image/png", Data: pngBase64}}}},
				},
				CacheControl: anthropic.NewCacheControlEphemeralParam(),
			}},
		)
		msgs = append(msgs, user, assistant, results)
	}
	schema := anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}, Required: []string{"path"}}
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 16000,
		System: []anthropic.TextBlockParam{
			{Text: "You are a coding agent.", CacheControl: anthropic.NewCacheControlEphemeralParam()},
			{Text: "Answer tersely."},
		},
		Messages: msgs,
		Tools: []anthropic.ToolUnionParam{
			{OfTool: &anthropic.ToolParam{Name: "ls", Description: anthropic.String("List a directory"), InputSchema: schema}},
			{OfTool: &anthropic.ToolParam{Name: "du", Description: anthropic.String("Size a directory"), InputSchema: schema, CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		},
		Thinking:      anthropic.ThinkingConfigParamOfEnabled(4000),
		Metadata:      anthropic.MetadataParam{UserID: anthropic.String("user_1234")},
		Temperature:   anthropic.Float(1),
		StopSequences: []string{"\n\nHuman:"},
	}
}

// openAIParams is a Chat Completions conversation with named messages,
// content parts, images with detail, parallel tool calls whose arguments
// are spaced as a model writes them, a refusal, tool results as parts.
func openAIParams(rounds int) openai.ChatCompletionNewParams {
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a coding agent. Answer tersely.")}
	for i := 0; i < rounds; i++ {
		user := openai.UserMessage(fmt.Sprintf("step %d: list and size /tmp <b>&</b>", i))
		if i == 0 {
			user = openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("step 0: what is in this picture and in /tmp?"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64," + pngBase64, Detail: "low"}),
			})
			user.OfUser.Name = openai.String("alex")
		}
		ls, du := fmt.Sprintf("call_ls_%d", i), fmt.Sprintf("call_du_%d", i)
		assistant := openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			Name: openai.String("agent"),
			ToolCalls: []openai.ChatCompletionMessageToolCallParam{
				{ID: ls, Function: openai.ChatCompletionMessageToolCallFunctionParam{Name: "ls", Arguments: `{"path": "/tmp",  "all": true}`}},
				{ID: du, Function: openai.ChatCompletionMessageToolCallFunctionParam{Name: "du", Arguments: "{\n  \"path\": \"/tmp\"\n}"}},
			},
		}}
		if i == 1 {
			assistant.OfAssistant.Refusal = openai.String("I will not delete /tmp.")
		}
		msgs = append(msgs, user, assistant,
			openai.ToolMessage(toolOutput(i), ls),
			openai.ToolMessage([]openai.ChatCompletionContentPartTextParam{{Text: "8K"}, {Text: "\t/tmp"}}, du))
	}
	params := shared.FunctionParameters{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []string{"path"}}
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: msgs,
		Tools: []openai.ChatCompletionToolParam{
			{Function: shared.FunctionDefinitionParam{Name: "ls", Description: openai.String("List a directory"), Parameters: params}},
			{Function: shared.FunctionDefinitionParam{Name: "du", Description: openai.String("Size a directory"), Parameters: params, Strict: openai.Bool(false)}},
		},
		Temperature:         openai.Float(0.2),
		MaxCompletionTokens: openai.Int(2000),
		Seed:                openai.Int(7),
		ParallelToolCalls:   openai.Bool(true),
		Metadata:            shared.Metadata{"run": "r1"},
		User:                openai.String("user_1234"),
	}
}

// recordAnthropic sends params through the Anthropic SDK and returns the
// body it sent. extra are top-level fields the SDK does not know, as Claude
// Code sends them.
func recordAnthropic(t *testing.T, params anthropic.MessageNewParams, stream bool) []byte {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	client := anthropic.NewClient(aoption.WithBaseURL(srv.URL), aoption.WithAPIKey("test-key"), aoption.WithMaxRetries(0),
		aoption.WithRequestTimeout(30*time.Second),
		aoption.WithJSONSet("context_management", map[string]any{"edits": []any{map[string]any{"type": "clear_thinking_20251015", "keep": "all"}}}),
		aoption.WithJSONSet("output_config", map[string]any{"effort": "high"}))
	ctx := context.Background()
	if stream {
		s := client.Messages.NewStreaming(ctx, params)
		for s.Next() {
		}
		require.NoError(t, s.Err())
	} else {
		_, err := client.Messages.New(ctx, params)
		require.NoError(t, err)
	}
	return rec.last(t)
}

func recordOpenAI(t *testing.T, params openai.ChatCompletionNewParams, stream bool) []byte {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	client := openai.NewClient(ooption.WithBaseURL(srv.URL+"/v1"), ooption.WithAPIKey("test-key"), ooption.WithMaxRetries(0),
		ooption.WithRequestTimeout(30*time.Second),
		ooption.WithJSONSet("prompt_cache_key", "session-1"))
	ctx := context.Background()
	if stream {
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := client.Chat.Completions.NewStreaming(ctx, params)
		for s.Next() {
		}
		require.NoError(t, s.Err())
	} else {
		_, err := client.Chat.Completions.New(ctx, params)
		require.NoError(t, err)
	}
	return rec.last(t)
}

func TestSDKRequestsRoundTripByteForByte(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "streaming"}[stream]
		t.Run("anthropic/"+name, func(t *testing.T) {
			body := recordAnthropic(t, anthropicParams(3), stream)
			checkByteForByte(t, body, formats.Anthropic)
		})
		t.Run("openai/"+name, func(t *testing.T) {
			body := recordOpenAI(t, openAIParams(3), stream)
			checkByteForByte(t, body, formats.OpenAI)
		})
	}
}

func checkByteForByte(t *testing.T, body []byte, format string) {
	t.Helper()
	s, err := formats.Read(bytes.NewReader(body), "")
	require.NoError(t, err)
	require.Equal(t, format, s.Format)
	require.NotNil(t, s.Request)
	assert.Empty(t, s.Repaired, "the SDK's request needed repairs")
	var out bytes.Buffer
	require.NoError(t, s.Request.Write(&out, s.Messages))
	assert.Equal(t, string(body), out.String(), "read and written with nothing folded, the request changed")
}

// engine compacts with a fixed summary, as a strategy with no model would.
func engine(t *testing.T) *host.Engine {
	t.Helper()
	e, err := host.New(host.Config{ContextWindow: 8000, MaxOutputTokens: 1000, Tokenizer: "chars", KeepRecentTokens: 900, SummaryTokens: 200},
		host.WithStrategy("structured", host.StrategyFunc(func(_ context.Context, _ plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
			return &abi.SummarizeResponse{Summary: fmt.Sprintf("Listed and sized /tmp in %d messages.", len(req.Messages))}, nil
		})))
	require.NoError(t, err)
	return e
}

// compact reads body, folds a prefix through the engine as the CLI and the
// API do, and writes the request back.
func compact(t *testing.T, body []byte) (out []byte, kept int) {
	t.Helper()
	s, err := formats.Read(bytes.NewReader(body), "")
	require.NoError(t, err)
	e := engine(t)
	sess := e.NewSession()
	require.NoError(t, sess.Append(s.Messages...))
	c, err := e.Compact(context.Background(), sess, host.CompactOptions{})
	require.NoError(t, err)
	require.Positive(t, c.MessagesFolded)
	ctx := sess.Context()
	for _, m := range ctx {
		if !m.Summary && !m.Pinned {
			kept++
		}
	}
	var buf bytes.Buffer
	require.NoError(t, s.Request.Write(&buf, ctx))
	return buf.Bytes(), kept
}

func TestSDKRequestsSurviveCompaction(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "streaming"}[stream]
		t.Run("anthropic/"+name, func(t *testing.T) {
			checkAnthropicCompaction(t, recordAnthropic(t, anthropicParams(6), stream))
		})
		t.Run("openai/"+name, func(t *testing.T) {
			checkOpenAICompaction(t, recordOpenAI(t, openAIParams(6), stream))
		})
	}
}

// checkAnthropicCompaction compacts a recording of anthropicParams(6) and
// checks what the result keeps.
func checkAnthropicCompaction(t *testing.T, body []byte) {
	t.Helper()
	out, kept := compact(t, body)
	in, got := topLevel(t, body), topLevel(t, out)
	require.Positive(t, kept)
	checkTopLevel(t, in, got, "messages")
	inMsgs, gotMsgs := elements(t, in["messages"]), elements(t, got["messages"])
	require.Len(t, gotMsgs, kept+1, "want the summary and the kept messages")
	assert.Contains(t, string(gotMsgs[0]), "Listed and sized /tmp")
	// Every kept message is its source's bytes: thinking signatures,
	// redacted thinking, cache_control, tool inputs and images included.
	for i := 1; i <= kept; i++ {
		assert.Equal(t, string(inMsgs[len(inMsgs)-kept+i-1]), string(gotMsgs[i]), "kept message %d", i)
	}
	assert.Contains(t, string(out), `"signature":"EqQBCkYIBxgCKkD5+sig/=="`)
	assert.Contains(t, string(out), `"cache_control":{"type":"ephemeral"}`)
	sendable(t, out, formats.Anthropic)
}

// checkOpenAICompaction compacts a recording of openAIParams(6) and checks
// what the result keeps.
func checkOpenAICompaction(t *testing.T, body []byte) {
	t.Helper()
	out, _ := compact(t, body)
	in, got := topLevel(t, body), topLevel(t, out)
	checkTopLevel(t, in, got, "messages")
	inMsgs, gotMsgs := elements(t, in["messages"]), elements(t, got["messages"])
	require.Greater(t, len(inMsgs), len(gotMsgs))
	assert.Equal(t, string(inMsgs[0]), string(gotMsgs[0]), "the system message")
	assert.Contains(t, string(gotMsgs[1]), "Listed and sized /tmp")
	// The kept messages are the source's last ones, as sent.
	tail := gotMsgs[2:]
	require.NotEmpty(t, tail)
	for i, m := range tail {
		assert.Equal(t, string(inMsgs[len(inMsgs)-len(tail)+i]), string(m), "kept message %d", i)
	}
	assert.Contains(t, string(out), `"arguments":"{\"path\": \"/tmp\",  \"all\": true}"`)
	sendable(t, out, formats.OpenAI)
}

// topLevel is the request's top-level members, as sent.
func topLevel(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m))
	return m
}

func elements(t *testing.T, raw json.RawMessage) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// checkTopLevel checks that every member of in but except is in got with
// the same bytes, and that got has nothing else.
func checkTopLevel(t *testing.T, in, got map[string]json.RawMessage, except string) {
	t.Helper()
	require.NotEmpty(t, in)
	for k, v := range in {
		if k == except {
			continue
		}
		if assert.Contains(t, got, k, "top-level field lost") {
			assert.Equal(t, string(v), string(got[k]), "top-level field %q changed", k)
		}
	}
	assert.Len(t, got, len(in))
}

// sendable reads the compacted request back: it is a valid request of its
// format, with its tool calls answered.
func sendable(t *testing.T, out []byte, format string) {
	t.Helper()
	s, err := formats.Read(bytes.NewReader(out), format)
	require.NoError(t, err)
	assert.Empty(t, s.Repaired)
	assert.NoError(t, formats.Validate(s.Messages))
}
