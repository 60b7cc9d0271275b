package overflow

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go"
	openaioption "github.com/openai/openai-go/option"
)

type agentError struct {
	status int
	body   []byte
}

func (e *agentError) Error() string    { return fmt.Sprintf("agent call failed with %d", e.status) }
func (e *agentError) HTTPStatus() int  { return e.status }
func (e *agentError) HTTPBody() []byte { return e.body }

func TestFromErrorHTTPError(t *testing.T) {
	err := fmt.Errorf("turn 12: %w", &agentError{400, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 201000 tokens > 200000 maximum"}}`)})
	got := FromError(err)
	if !got.Overflow || got.Provider != "anthropic" || got.ContextWindow != 200000 || got.Requested != 201000 {
		t.Errorf("FromError = %+v", got)
	}
	if got := FromError(&agentError{429, []byte(`{"message":"Too many tokens, please wait before trying again."}`)}); got.Overflow {
		t.Errorf("a 429 classified as overflow: %+v", got)
	}
}

func TestFromErrorText(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		// The text of an *anthropic.Error (Go SDK).
		{"anthropic go sdk text", errors.New(`POST "https://api.anthropic.com/v1/messages": 400 Bad Request (Request-ID: req_011CWdepJvA2D819tdYYq4h7) {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 200251 tokens > 200000 maximum"},"request_id":"req_011CWdepJvA2D819tdYYq4h7"}`), true},
		// The Python SDKs' text, which is not JSON.
		{"python sdk text", errors.New(`Error code: 400 - {'error': {'message': "This model's maximum context length is 8192 tokens. However, your messages resulted in 8202 tokens. Please reduce the length of the messages.", 'type': 'invalid_request_error', 'param': 'messages', 'code': 'context_length_exceeded'}}`), true},
		// AWS SDK for Go v2, Bedrock Converse.
		{"bedrock go sdk", errors.New(`operation error Bedrock Runtime: Converse, https response error StatusCode: 400, RequestID: 16fb0962-139d-4c70-ba9c-602d9630e854, ValidationException: Input is too long for requested model.`), true},
		{"bedrock go sdk throttling", errors.New(`operation error Bedrock Runtime: Converse, https response error StatusCode: 429, RequestID: ca47a5ce-e260-4824-aa0e-2e62669d5d6e, ThrottlingException: Too many tokens, please wait before trying again.`), false},
		// The TypeScript SDKs' text for a bodiless response.
		{"no body", errors.New(`400 status code (no body)`), true},
		{"wrapped", fmt.Errorf("summarize: %w", errors.New(`mistral: status 400: Prompt contains 40046 tokens and 0 draft tokens, too large for model with 32768 maximum context length`)), true},
		{"rate limit text", errors.New(`openai: status 429: Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29937, Requested 385.`), false},
		{"server error text", errors.New(`POST "https://api.openai.com/v1/chat/completions": 500 Internal Server Error {"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`), false},
		{"deadline", fmt.Errorf("complete: %w", context.DeadlineExceeded), false},
		{"cancelled", context.Canceled, false},
		{"unrelated", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FromError(tt.err); got.Overflow != tt.want {
				t.Errorf("FromError(%v) = %+v, want overflow %v", tt.err, got, tt.want)
			}
		})
	}
}

// errorServer answers every request with status and body.
func errorServer(t *testing.T, status int, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The errors the official SDKs return, as an agent that calls them itself
// would pass them on.
func TestFromErrorAnthropicSDK(t *testing.T) {
	srv := errorServer(t, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_1"}`)
	client := anthropic.NewClient(anthropicoption.WithoutEnvironmentDefaults(), anthropicoption.WithBaseURL(srv.URL),
		anthropicoption.WithAPIKey("test"), anthropicoption.WithMaxRetries(0))
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "claude-sonnet-4-5", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var ae *anthropic.Error
	if !errors.As(err, &ae) {
		t.Fatalf("want an *anthropic.Error, got %T %v", err, err)
	}
	got := FromError(fmt.Errorf("agent: %w", err))
	if !got.Overflow || got.Provider != "anthropic" || got.ContextWindow != 200000 || got.Requested != 208310 {
		t.Errorf("FromError = %+v", got)
	}
}

func TestFromErrorOpenAISDK(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{"overflow", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, true},
		{"rate limit", 429, `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in 644ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := errorServer(t, tt.status, tt.body)
			svc := openai.NewChatCompletionService(openaioption.WithBaseURL(srv.URL), openaioption.WithAPIKey("test"), openaioption.WithMaxRetries(0))
			_, err := svc.New(context.Background(), openai.ChatCompletionNewParams{
				Model:    "gpt-4o",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			var oe *openai.Error
			if !errors.As(err, &oe) {
				t.Fatalf("want an *openai.Error, got %T %v", err, err)
			}
			if got := FromError(err); got.Overflow != tt.want {
				t.Errorf("FromError = %+v, want overflow %v", got, tt.want)
			}
		})
	}
}

func TestFromErrorKeepsNumbersFromText(t *testing.T) {
	got := FromError(errors.New(`xai: status 400: {"code":"Client specified an invalid argument","error":"This model's maximum prompt length is 131,072 but the request contains 149,617 tokens."}`))
	if !got.Overflow || got.ContextWindow != 131072 || got.Requested != 149617 || !strings.Contains(got.Reason, "prompt") {
		t.Errorf("FromError = %+v", got)
	}
}
