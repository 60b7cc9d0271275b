package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/overflow"
	"github.com/compact-host/compact-host/host/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testKey = "sk-test-0123456789abcdef"

// api describes one provider's wire format as its servers speak it.
type api struct {
	kind string
	path string // where the SDK posts
	// baseURL turns the fake's URL into Config.BaseURL.
	baseURL func(srv string) string
	// keyHeader and keyValue are where and how the key must arrive.
	keyHeader string
	keyValue  string
	// ok is a 200 body with text and usage that includes cache tokens;
	// usage is what it must map to.
	ok    func(text string) string
	usage abi.Usage
	// empty is a 200 body with no text.
	empty string
	// overflows are error responses that are context overflows.
	overflows []errorReply
	// maxTokensField is the request field that carries the output limit.
	maxTokensField string
}

type errorReply struct {
	name   string
	status int
	body   string
}

var anthropicAPI = api{
	kind:      provider.KindAnthropic,
	path:      "/v1/messages",
	baseURL:   func(srv string) string { return srv },
	keyHeader: "X-Api-Key",
	keyValue:  testKey,
	ok: func(text string) string {
		return `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-haiku-4-5",` +
			`"content":[{"type":"text","text":` + quote(text) + `}],"stop_reason":"end_turn","stop_sequence":null,` +
			`"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":34}}`
	},
	usage: abi.Usage{InputTokens: 12, OutputTokens: 34, CacheReadTokens: 2000, CacheWriteTokens: 100},
	empty: `{"id":"msg_02","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[],"stop_reason":"max_tokens","stop_sequence":null,` +
		`"usage":{"input_tokens":50,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`,
	overflows: []errorReply{
		{"prompt too long", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_011CVQe1dLrGNMJyE1ghG1av"}`},
		{"request_too_large", 413, `{"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}`},
	},
	maxTokensField: "max_tokens",
}

var openAIAPI = api{
	kind:      provider.KindOpenAI,
	path:      "/v1/chat/completions",
	baseURL:   func(srv string) string { return srv + "/v1" },
	keyHeader: "Authorization",
	keyValue:  "Bearer " + testKey,
	ok: func(text string) string {
		return `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion","created":1741569952,"model":"gpt-4.1-mini-2025-04-14",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":` + quote(text) + `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":2112,"completion_tokens":34,"total_tokens":2146,"prompt_tokens_details":{"cached_tokens":2000,"audio_tokens":0},` +
			`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default"}`
	},
	usage: abi.Usage{InputTokens: 112, OutputTokens: 34, CacheReadTokens: 2000},
	empty: `{"id":"chatcmpl-2","object":"chat.completion","created":1741569952,"model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","content":"","refusal":null},"finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":50,"completion_tokens":0,"total_tokens":50}}`,
	overflows: []errorReply{
		{"openai context_length_exceeded", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 192041 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
		// Bodies the SDK cannot read as an OpenAI error: the raw body must
		// still reach the caller.
		{"vllm top-level error", 400, `{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 19591 tokens (9591 in the messages, 10000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`},
		{"ollama truncate false", 400, `{"error":"{\"error\":{\"code\":400,\"message\":\"request (8889 tokens) exceeds the available context size (4096 tokens), try increasing it\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":8889,\"n_ctx\":4096}}"}`},
		{"llama.cpp", 400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}`},
		// A 5xx that is an overflow must not be retried either.
		{"llama.cpp 500", 500, `{"error":{"code":500,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":1407,"n_ctx":256}}`},
		{"bodiless 400", 400, ``},
	},
	maxTokensField: "max_tokens",
}

// responsesEvents is a streamed Responses answer, as the API sends it.
func responsesEvents(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		var head struct{ Type string }
		_ = json.Unmarshal([]byte(e), &head)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", head.Type, e)
	}
	return b.String()
}

var responsesAPI = api{
	kind:      provider.KindResponses,
	path:      "/v1/responses",
	baseURL:   func(srv string) string { return srv + "/v1" },
	keyHeader: "Authorization",
	keyValue:  "Bearer " + testKey,
	ok: func(text string) string {
		item := `{"id":"msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41","type":"message","status":"completed","role":"assistant",` +
			`"content":[{"type":"output_text","annotations":[],"text":` + quote(text) + `}]}`
		return responsesEvents(
			`{"type":"response.created","sequence_number":0,"response":{"id":"resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41","object":"response","status":"in_progress","model":"gpt-4.1-mini-2025-04-14","output":[]}}`,
			`{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41","output_index":0,"content_index":0,"delta":`+quote(text)+`}`,
			`{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":`+item+`}`,
			`{"type":"response.completed","sequence_number":3,"response":{"id":"resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41","object":"response","status":"completed","model":"gpt-4.1-mini-2025-04-14",`+
				`"output":[`+item+`],"usage":{"input_tokens":2112,"input_tokens_details":{"cached_tokens":2000},"output_tokens":34,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2146}}}`)
	},
	usage: abi.Usage{InputTokens: 112, OutputTokens: 34, CacheReadTokens: 2000},
	empty: responsesEvents(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_2","object":"response","status":"in_progress","model":"gpt-4.1-mini","output":[]}}`,
		`{"type":"response.incomplete","sequence_number":1,"response":{"id":"resp_2","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"model":"gpt-4.1-mini","output":[],"usage":{"input_tokens":50,"output_tokens":0,"total_tokens":50}}}`),
	overflows: []errorReply{
		{"responses context_length_exceeded", 400, `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`},
	},
	maxTokensField: "max_output_tokens",
}

var apis = []api{anthropicAPI, openAIAPI, responsesAPI}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// config returns a fast-failing Config for the fake at srv.
func (a api) config(srv string) provider.Config {
	return provider.Config{
		Kind:           a.kind,
		BaseURL:        a.baseURL(srv),
		APIKey:         testKey,
		Model:          "main-model",
		Timeout:        5 * time.Second,
		MaxRetries:     2,
		RetryBaseDelay: time.Millisecond,
		RetryMaxDelay:  10 * time.Millisecond,
	}
}

func newClient(t *testing.T, cfg provider.Config) provider.Client {
	t.Helper()
	c, err := provider.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

var summarizeRequest = &abi.CompleteRequest{
	System: "Summarize the conversation.",
	Messages: []abi.Message{
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Fix the failing test in parser.go"}}},
		{Role: abi.RoleAssistant, Content: []abi.Block{
			{Type: abi.BlockThinking, Text: "private reasoning"},
			{Type: abi.BlockToolUse, ID: "toolu_01", Name: "read_file", Input: json.RawMessage(`{ "path": "parser.go" }`)},
		}},
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "toolu_01", Text: "package parser", IsError: true}}},
	},
	MaxTokens: 777,
}

func TestCompleteSuccess(t *testing.T) {
	for _, a := range apis {
		t.Run(a.kind, func(t *testing.T) {
			srv := newFakeAPI(t, reply(200, a.ok("The user asked to fix parser.go.")))
			c := newClient(t, a.config(srv.URL))

			resp, err := c.Complete(context.Background(), summarizeRequest)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if resp.Text != "The user asked to fix parser.go." {
				t.Errorf("text = %q", resp.Text)
			}
			if resp.Usage != a.usage {
				t.Errorf("usage = %+v, want %+v", resp.Usage, a.usage)
			}
			if got := resp.Usage.PromptTokens(); got != 2112 {
				t.Errorf("PromptTokens = %d, want 2112, the prompt the provider counted", got)
			}
			if resp.Model == "" {
				t.Error("no model in the response")
			}

			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.path != a.path {
				t.Errorf("path = %q, want %q", r.path, a.path)
			}
			if got := r.header.Get(a.keyHeader); got != a.keyValue {
				t.Errorf("%s = %q, want %q", a.keyHeader, got, a.keyValue)
			}
			if got := r.body["model"]; got != "main-model" {
				t.Errorf("model = %v", got)
			}
			if got := r.body[a.maxTokensField]; got != float64(777) {
				t.Errorf("%s = %v, want 777", a.maxTokensField, got)
			}
			text := fmt.Sprint(r.body["messages"], r.body["system"], r.body["input"], r.body["instructions"])
			for _, want := range []string{"Summarize the conversation.", "Fix the failing test", "[tool call read_file id=toolu_01] {\"path\":\"parser.go\"}", "[tool result id=toolu_01 error] package parser"} {
				if !strings.Contains(text, want) {
					t.Errorf("request does not contain %q: %s", want, text)
				}
			}
			if strings.Contains(text, "private reasoning") {
				t.Error("thinking block sent")
			}
		})
	}
}

func TestAnthropicVersionHeader(t *testing.T) {
	srv := newFakeAPI(t, reply(200, anthropicAPI.ok("ok")))
	c := newClient(t, anthropicAPI.config(srv.URL))
	if _, err := c.Complete(context.Background(), summarizeRequest); err != nil {
		t.Fatal(err)
	}
	if got := srv.requests()[0].header.Get("Anthropic-Version"); got == "" {
		t.Error("no anthropic-version header")
	}
	if got := srv.requests()[0].header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q; Anthropic keys go in x-api-key only", got)
	}
}

func TestCompactionModel(t *testing.T) {
	for _, a := range apis {
		t.Run(a.kind, func(t *testing.T) {
			for _, tt := range []struct{ compaction, want string }{{"cheap-model", "cheap-model"}, {"", "main-model"}} {
				srv := newFakeAPI(t, reply(200, a.ok("summary")))
				cfg := a.config(srv.URL)
				cfg.CompactionModel = tt.compaction
				c := newClient(t, cfg)
				if c.Model() != tt.want {
					t.Errorf("Model() = %q, want %q", c.Model(), tt.want)
				}
				if _, err := c.Complete(context.Background(), summarizeRequest); err != nil {
					t.Fatal(err)
				}
				if got := srv.requests()[0].body["model"]; got != tt.want {
					t.Errorf("request model = %v, want %q", got, tt.want)
				}
			}
		})
	}
}

func TestOverflowIsNotRetried(t *testing.T) {
	for _, a := range apis {
		for _, o := range a.overflows {
			t.Run(a.kind+"/"+o.name, func(t *testing.T) {
				srv := newFakeAPI(t, reply(o.status, o.body))
				c := newClient(t, a.config(srv.URL))

				_, err := c.Complete(context.Background(), summarizeRequest)
				if err == nil {
					t.Fatal("no error")
				}
				if r := overflow.FromError(err); !r.Overflow {
					t.Errorf("overflow.FromError = %+v, want an overflow; err = %v", r, err)
				}
				var pe *provider.Error
				if !errors.As(err, &pe) {
					t.Fatalf("want a *provider.Error, got %T: %v", err, err)
				}
				if pe.StatusCode != o.status || string(pe.Body) != o.body || pe.Provider != a.kind {
					t.Errorf("Error = {%s %d %q}, want {%s %d %q}", pe.Provider, pe.StatusCode, pe.Body, a.kind, o.status, o.body)
				}
				if !pe.Overflow() {
					t.Error("Error.Overflow() = false")
				}
				if n := len(srv.requests()); n != 1 {
					t.Errorf("%d requests, want 1: an overflow is not retried", n)
				}
			})
		}
	}
}

func TestErrorFields(t *testing.T) {
	srv := newFakeAPI(t, reply(400, openAIAPI.overflows[0].body))
	c := newClient(t, openAIAPI.config(srv.URL))
	_, err := c.Complete(context.Background(), summarizeRequest)
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("got %T: %v", err, err)
	}
	if pe.Code != "context_length_exceeded" || pe.Type != "invalid_request_error" || !strings.HasPrefix(pe.Message, "This model's maximum context length") {
		t.Errorf("Error = %+v", pe)
	}
	if !strings.Contains(err.Error(), "HTTP 400") || !strings.Contains(err.Error(), "context_length_exceeded") {
		t.Errorf("error text %q lacks status or code", err)
	}
}

func TestRetriedThenSuccess(t *testing.T) {
	for _, a := range apis {
		for _, first := range []errorReply{
			{"429", 429, `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
			{"500", 500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`},
			{"529 overloaded", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
			{"503 no body", 503, ``},
		} {
			t.Run(a.kind+"/"+first.name, func(t *testing.T) {
				srv := newFakeAPI(t, reply(first.status, first.body, "Retry-After", "0"), reply(200, a.ok("done")))
				c := newClient(t, a.config(srv.URL))
				resp, err := c.Complete(context.Background(), summarizeRequest)
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				if resp.Text != "done" {
					t.Errorf("text = %q", resp.Text)
				}
				if n := len(srv.requests()); n != 2 {
					t.Errorf("%d requests, want 2", n)
				}
			})
		}
	}
}

func TestPersistentServerErrorGivesUp(t *testing.T) {
	for _, a := range apis {
		t.Run(a.kind, func(t *testing.T) {
			var replies []http.HandlerFunc
			for i := 1; i <= 5; i++ {
				replies = append(replies, reply(500, fmt.Sprintf(`{"error":{"message":"failure %d","type":"server_error"}}`, i)))
			}
			srv := newFakeAPI(t, replies...)
			cfg := a.config(srv.URL)
			cfg.MaxRetries = 2
			c := newClient(t, cfg)

			_, err := c.Complete(context.Background(), summarizeRequest)
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("want a *provider.Error, got %T: %v", err, err)
			}
			if pe.StatusCode != 500 || pe.Message != "failure 3" {
				t.Errorf("last error = %d %q, want 500 \"failure 3\"", pe.StatusCode, pe.Message)
			}
			if n := len(srv.requests()); n != 3 {
				t.Errorf("%d requests, want 3 (MaxRetries 2)", n)
			}
			if overflow.FromError(err).Overflow {
				t.Error("a 500 classified as overflow")
			}
		})
	}
}

func TestNoRetries(t *testing.T) {
	srv := newFakeAPI(t, reply(500, `{"error":{"message":"boom"}}`))
	cfg := openAIAPI.config(srv.URL)
	cfg.MaxRetries = -1
	c := newClient(t, cfg)
	if _, err := c.Complete(context.Background(), summarizeRequest); err == nil {
		t.Fatal("no error")
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("%d requests, want 1 (MaxRetries -1)", n)
	}
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	for _, a := range apis {
		for _, e := range []errorReply{
			{"400", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`},
			{"401", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
			{"404", 404, `{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`},
			{"408", 408, `{"error":{"message":"timeout"}}`},
		} {
			t.Run(a.kind+"/"+e.name, func(t *testing.T) {
				srv := newFakeAPI(t, reply(e.status, e.body, "X-Should-Retry", "true"), reply(200, a.ok("late")))
				c := newClient(t, a.config(srv.URL))
				_, err := c.Complete(context.Background(), summarizeRequest)
				var pe *provider.Error
				if !errors.As(err, &pe) || pe.StatusCode != e.status {
					t.Fatalf("got %T %v, want a *provider.Error with status %d", err, err, e.status)
				}
				if overflow.FromError(err).Overflow {
					t.Error("classified as overflow")
				}
				if n := len(srv.requests()); n != 1 {
					t.Errorf("%d requests, want 1", n)
				}
			})
		}
	}
}

func TestRetryAfterLongerThanMaxDelay(t *testing.T) {
	srv := newFakeAPI(t, reply(429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, "Retry-After", "3600"))
	c := newClient(t, anthropicAPI.config(srv.URL))
	_, err := c.Complete(context.Background(), summarizeRequest)
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("got %T: %v", err, err)
	}
	if pe.RetryAfter != time.Hour {
		t.Errorf("RetryAfter = %v, want 1h", pe.RetryAfter)
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("%d requests, want 1: a wait beyond RetryMaxDelay is left to the caller", n)
	}
}

func TestEmptyCompletion(t *testing.T) {
	for _, a := range apis {
		t.Run(a.kind, func(t *testing.T) {
			srv := newFakeAPI(t, reply(200, a.empty))
			c := newClient(t, a.config(srv.URL))
			_, err := c.Complete(context.Background(), summarizeRequest)
			if !errors.Is(err, provider.ErrEmptyCompletion) {
				t.Fatalf("err = %v, want ErrEmptyCompletion", err)
			}
			var ee *provider.EmptyCompletionError
			if !errors.As(err, &ee) {
				t.Fatalf("got %T", err)
			}
			if ee.Usage.PromptTokens() != 50 || ee.StopReason == "" {
				t.Errorf("EmptyCompletionError = %+v, want the usage and stop reason", ee)
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestOpenAINoChoices(t *testing.T) {
	srv := newFakeAPI(t, reply(200, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":0,"total_tokens":9}}`))
	c := newClient(t, openAIAPI.config(srv.URL))
	if _, err := c.Complete(context.Background(), summarizeRequest); !errors.Is(err, provider.ErrEmptyCompletion) {
		t.Errorf("err = %v, want ErrEmptyCompletion", err)
	}
}

func TestStalledServerTimesOut(t *testing.T) {
	for _, a := range apis {
		for _, s := range []struct {
			name    string
			handler http.HandlerFunc
		}{{"before headers", stall}, {"after headers", stallAfterHeaders}} {
			t.Run(a.kind+"/"+s.name, func(t *testing.T) {
				srv := newFakeAPI(t, s.handler)
				cfg := a.config(srv.URL)
				cfg.Timeout = 50 * time.Millisecond
				cfg.MaxRetries = 1
				// Attempts are counted as the client sends them: on a busy
				// machine the second attempt's 50 ms can run out before the
				// server's handler has recorded it.
				attempts := &countingTransport{next: http.DefaultTransport}
				cfg.HTTPClient = &http.Client{Transport: attempts}
				c := newClient(t, cfg)

				_, err := c.Complete(context.Background(), summarizeRequest)
				var te *provider.TimeoutError
				if !errors.As(err, &te) {
					t.Fatalf("got %T: %v, want a *provider.TimeoutError", err, err)
				}
				if !errors.Is(err, provider.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
					t.Error("errors.Is ErrTimeout and context.DeadlineExceeded should hold")
				}
				if te.Timeout != cfg.Timeout || te.Provider != a.kind {
					t.Errorf("TimeoutError = %+v", te)
				}
				if n := attempts.count.Load(); n != 2 {
					t.Errorf("%d attempts, want 2: a timed-out attempt is retried", n)
				}
				if overflow.FromError(err).Overflow {
					t.Error("a timeout classified as overflow")
				}
			})
		}
	}
}

func TestCallerCancelIsNotRetried(t *testing.T) {
	for _, a := range apis {
		t.Run(a.kind, func(t *testing.T) {
			srv := newFakeAPI(t, stall)
			srv.arrived = make(chan struct{}, 4)
			c := newClient(t, a.config(srv.URL))
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				<-srv.arrived
				cancel()
			}()
			_, err := c.Complete(ctx, summarizeRequest)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			var te *provider.TimeoutError
			if errors.As(err, &te) {
				t.Error("the caller's cancellation reported as a timeout")
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestLostConnectionIsRetried(t *testing.T) {
	for _, a := range apis {
		t.Run(a.kind, func(t *testing.T) {
			srv := newFakeAPI(t, hangUp, reply(200, a.ok("after reconnect")))
			c := newClient(t, a.config(srv.URL))
			resp, err := c.Complete(context.Background(), summarizeRequest)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if resp.Text != "after reconnect" {
				t.Errorf("text = %q", resp.Text)
			}
			if n := len(srv.requests()); n != 2 {
				t.Errorf("%d requests, want 2", n)
			}
		})
	}
}

func TestAPIKeyNeverInErrors(t *testing.T) {
	for _, a := range apis {
		t.Run(a.kind, func(t *testing.T) {
			// A server that echoes the key it was sent, as some gateways do.
			// It also quotes a key of another header, which the client
			// does not know but recognizes by its shape.
			const otherKey = "sk-proj-other-header-0123456789"
			echo := func(w http.ResponseWriter, r *http.Request) {
				got := r.Header.Get("X-Api-Key") + r.Header.Get("Authorization")
				reply(401, `{"error":{"message":"invalid key `+got+`; also got x-goog-api-key: `+otherKey+`","type":"authentication_error"}}`)(w, r)
			}
			srv := newFakeAPI(t, echo)
			c := newClient(t, a.config(srv.URL))
			_, err := c.Complete(context.Background(), summarizeRequest)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error text contains the key: %v", err)
			}
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %T", err)
			}
			for _, k := range []string{testKey, otherKey} {
				if strings.Contains(string(pe.Body), k) || strings.Contains(pe.Message, k) {
					t.Errorf("Error body or message contains a key: %q", pe.Body)
				}
			}
			if !strings.Contains(pe.Message, "[redacted]") {
				t.Errorf("message = %q, want the key redacted", pe.Message)
			}

			// Nothing listens: the transport error must not carry it either.
			srv.Close()
			cfg := a.config(srv.URL)
			cfg.MaxRetries = -1
			_, err = newClient(t, cfg).Complete(context.Background(), summarizeRequest)
			if err == nil || strings.Contains(err.Error(), testKey) {
				t.Errorf("transport error = %v", err)
			}
		})
	}
}

func TestLocalServerWithoutKey(t *testing.T) {
	srv := newFakeAPI(t, reply(200, openAIAPI.ok("local summary")))
	c := newClient(t, provider.Config{Kind: provider.KindOpenAI, BaseURL: srv.URL + "/v1", Model: "llama3.2"})
	resp, err := c.Complete(context.Background(), summarizeRequest)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "local summary" {
		t.Errorf("text = %q", resp.Text)
	}
	if got := srv.requests()[0].header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none without a key", got)
	}

	// A placeholder key is sent as given.
	srv2 := newFakeAPI(t, reply(200, openAIAPI.ok("ok")))
	c = newClient(t, provider.Config{Kind: provider.KindOpenAI, BaseURL: srv2.URL + "/v1", APIKey: "ollama", Model: "llama3.2"})
	if _, err := c.Complete(context.Background(), summarizeRequest); err != nil {
		t.Fatal(err)
	}
	if got := srv2.requests()[0].header.Get("Authorization"); got != "Bearer ollama" {
		t.Errorf("Authorization = %q", got)
	}
}

func TestOfficialOpenAIUsesMaxCompletionTokens(t *testing.T) {
	// The public API is reached through a transport that redirects to the
	// fake, so the request body can be checked.
	srv := newFakeAPI(t, reply(200, openAIAPI.ok("ok")))
	cfg := provider.Config{Kind: provider.KindOpenAI, APIKey: testKey, Model: "gpt-4.1-mini", HTTPClient: redirectTo(t, srv.URL)}
	c := newClient(t, cfg)
	if _, err := c.Complete(context.Background(), summarizeRequest); err != nil {
		t.Fatal(err)
	}
	body := srv.requests()[0].body
	if body["max_completion_tokens"] != float64(777) || body["max_tokens"] != nil {
		t.Errorf("max tokens fields = %v / %v, want max_completion_tokens only", body["max_completion_tokens"], body["max_tokens"])
	}
}

func TestNewValidates(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cfg    provider.Config
		noKey  bool
		wantOK bool
	}{
		{"anthropic without key", provider.Config{Kind: provider.KindAnthropic, Model: "m"}, true, false},
		{"openai without key", provider.Config{Kind: provider.KindOpenAI, Model: "m"}, true, false},
		{"local without key", provider.Config{Kind: provider.KindOpenAI, BaseURL: "http://localhost:11434/v1", Model: "m"}, false, true},
		{"no kind", provider.Config{APIKey: "k", Model: "m"}, false, false},
		{"unknown kind", provider.Config{Kind: "gemini", APIKey: "k", Model: "m"}, false, false},
		{"no model", provider.Config{Kind: provider.KindAnthropic, APIKey: "k"}, false, false},
		{"compaction model only", provider.Config{Kind: provider.KindAnthropic, APIKey: "k", CompactionModel: "m"}, false, true},
		{"relative base URL", provider.Config{Kind: provider.KindOpenAI, BaseURL: "localhost:8080", Model: "m"}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := provider.New(tt.cfg)
			if (err == nil) != tt.wantOK {
				t.Fatalf("New error = %v, want ok %v", err, tt.wantOK)
			}
			if errors.Is(err, provider.ErrNoKey) != tt.noKey {
				t.Errorf("errors.Is(ErrNoKey) = %v, want %v (err %v)", !tt.noKey, tt.noKey, err)
			}
		})
	}
}

func TestInvalidRequest(t *testing.T) {
	srv := newFakeAPI(t, reply(200, anthropicAPI.ok("x")))
	c := newClient(t, anthropicAPI.config(srv.URL))
	for _, req := range []*abi.CompleteRequest{nil, {System: "s"}, {Messages: []abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "  "}}}}}} {
		if _, err := c.Complete(context.Background(), req); !errors.Is(err, provider.ErrInvalidRequest) {
			t.Errorf("Complete(%+v) = %v, want ErrInvalidRequest", req, err)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestUnreadableSuccessIsNotRetried(t *testing.T) {
	for _, a := range apis {
		t.Run(a.kind, func(t *testing.T) {
			srv := newFakeAPI(t, reply(200, `{"id":`))
			c := newClient(t, a.config(srv.URL))
			_, err := c.Complete(context.Background(), summarizeRequest)
			if err == nil {
				t.Fatal("no error")
			}
			var pe *provider.Error
			if errors.As(err, &pe) || overflow.FromError(err).Overflow {
				t.Errorf("err = %v, want a plain decoding error", err)
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestOversizedResponseIsRefused(t *testing.T) {
	// A 200 whose body outgrows any summary: refused, not read to the end.
	huge := `{"model":"m","pad":"` + strings.Repeat("x", 33<<20) + `"}`
	srv := newFakeAPI(t, reply(200, huge))
	c := newClient(t, anthropicAPI.config(srv.URL))
	_, err := c.Complete(context.Background(), summarizeRequest)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than")
	assert.Len(t, srv.requests(), 1, "an oversized answer is not retried")
}

// countingTransport counts the requests a client sends.
type countingTransport struct {
	next  http.RoundTripper
	count atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.count.Add(1)
	return c.next.RoundTrip(r)
}
