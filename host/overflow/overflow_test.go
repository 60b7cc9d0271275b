package overflow

import (
	"strings"
	"testing"
)

// The bodies below are the ones the providers return, as reported in their
// SDKs' and users' issue trackers; numbers vary from report to report.
func TestClassifyProviderBodies(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		overflow  bool
		provider  string
		window    int
		requested int
	}{
		// Anthropic Messages API, 400 invalid_request_error.
		{"anthropic prompt too long", 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_011CVQe1dLrGNMJyE1ghG1av"}`,
			true, "anthropic", 200000, 208310},
		// Anthropic, input plus max_tokens over the limit.
		{"anthropic input plus max_tokens", 400,
			"{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, decrease input length or `max_tokens` and try again\"},\"request_id\":\"req_011CUB2XUHWkFnQzxcKBbjpF\"}",
			true, "anthropic", 200000, 178959},
		// Anthropic, 413 from the edge when the request is over 32 MB.
		{"anthropic 413 request_too_large", 413,
			`{"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}`,
			true, "anthropic", 0, 0},
		// Anthropic, 413 with the context-window message.
		{"anthropic 413 request size", 413,
			`{"type":"error","error":{"type":"invalid_request_error","message":"Request size exceeds model context window"},"request_id":"req_011CSPcw1jaHBKxvgq8Kga6G"}`,
			true, "anthropic", 0, 0},
		// OpenAI Chat Completions, 400 context_length_exceeded.
		{"openai messages resulted in", 400,
			`{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 192041 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			true, "openai", 128000, 192041},
		// OpenAI, messages plus completion.
		{"openai messages and completion", 400,
			`{"error":{"message":"This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			true, "openai", 4097, 4120},
		// OpenAI, newer models (Responses API wording).
		{"openai input exceeds context window", 400,
			`{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`,
			true, "openai", 0, 0},
		// Azure OpenAI, same code and message as OpenAI.
		{"azure", 400,
			`{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 10383 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded","status":400}}`,
			true, "openai", 8192, 10383},
		// Gemini API, 400 INVALID_ARGUMENT.
		{"gemini", 400,
			`{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","errors":[{"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","domain":"global","reason":"badRequest"}],"status":"INVALID_ARGUMENT"}}`,
			true, "gemini", 1048576, 1200293},
		// Gemini, wrapped in an array and without the count.
		{"gemini array no count", 400,
			`[{"error":{"code":400,"message":"The input token count exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]`,
			true, "gemini", 1048576, 0},
		// Amazon Bedrock, 400 ValidationException.
		{"bedrock input too long", 400,
			`{"message":"Input is too long for requested model."}`,
			true, "bedrock", 0, 0},
		// Amazon Bedrock, Claude through Converse.
		{"bedrock claude", 400,
			`{"message":"The model returned the following errors: prompt is too long: 227255 tokens > 200000 maximum"}`,
			true, "anthropic", 200000, 227255},
		// Amazon Bedrock, input token limit.
		{"bedrock too many input tokens", 400,
			`{"message":"too many input tokens"}`,
			true, "bedrock", 0, 0},
		// Mistral, 400.
		{"mistral", 400,
			`{"object":"error","message":"Prompt contains 40960 tokens and 0 draft tokens, too large for model with 32768 maximum context length","type":"invalid_request_message_error","param":null,"code":null}`,
			true, "mistral", 32768, 40960},
		// Mistral, newer body with a numeric code.
		{"mistral invalid args", 400,
			`{"object":"error","message":"Prompt contains 159202 tokens and 0 draft tokens, too large for model with 131072 maximum context length","type":"invalid_request_invalid_args","param":null,"code":"3051","raw_status_code":400}`,
			true, "mistral", 131072, 159202},
		// Groq, 400 context_length_exceeded with no numbers.
		{"groq", 400,
			`{"error":{"message":"Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			true, "groq", 0, 0},
		// OpenRouter, 400 with a numeric code.
		{"openrouter", 400,
			`{"error":{"message":"This endpoint's maximum context length is 32768 tokens. However, you requested about 42832 tokens (42832 of text input). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically.","code":400}}`,
			true, "openrouter", 32768, 42832},
		// OpenRouter passing Anthropic's error on in metadata.raw.
		{"openrouter upstream raw", 400,
			`{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 210000 tokens > 200000 maximum\"}}","provider_name":"Anthropic"}}}`,
			true, "anthropic", 200000, 210000},
		// xAI, 400 with the message under "error".
		{"xai", 400,
			`{"code":"Client specified an invalid argument","error":"This model's maximum prompt length is 131072 but the request contains 149617 tokens."}`,
			true, "xai", 131072, 149617},
		// DeepSeek, 400 with code invalid_request_error.
		{"deepseek", 400,
			`{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 131134 tokens (122942 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			true, "openai-compatible", 131072, 131134},
		// vLLM OpenAI server, older top-level body.
		{"vllm top-level", 400,
			`{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 19591 tokens (9591 in the messages, 10000 in the completion). Please reduce the length of the messages or completion. None","type":"BadRequestError","param":null,"code":400}`,
			true, "vllm", 16384, 19591},
		// vLLM OpenAI server, current body.
		{"vllm input tokens", 400,
			`{"error":{"message":"This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":null,"code":400}}`,
			true, "vllm", 32768, 40000},
		// vLLM engine validation passed through.
		{"vllm decoder prompt", 400,
			`{"object":"error","message":"The decoder prompt (length 21535) is longer than the maximum model length of 16384. Make sure that max_model_len is no smaller than the number of text tokens.","type":"BadRequestError","param":null,"code":400}`,
			true, "vllm", 16384, 21535},
		// vLLM-style "longer than the model's context length".
		{"vllm model context length", 400,
			`{"error":{"message":"The input (85050 tokens) is longer than the model's context length (32768 tokens).","type":"BadRequestError","code":400}}`,
			true, "vllm", 32768, 85050},
		// llama.cpp server, 400 exceed_context_size_error.
		{"llama.cpp 400", 400,
			`{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}`,
			true, "llama.cpp", 8192, 14429},
		// llama.cpp server, newer message with both numbers.
		{"llama.cpp counts in message", 400,
			`{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}`,
			true, "llama.cpp", 4096, 4476},
		// llama.cpp server builds that answered with a 500.
		{"llama.cpp 500", 500,
			`{"error":{"code":500,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":1407,"n_ctx":256}}`,
			true, "llama.cpp", 256, 1407},
		// LM Studio, 400 from its OpenAI-compatible server.
		{"lmstudio keep first", 400,
			`{"error":"Trying to keep the first 15857 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}`,
			true, "lmstudio", 4096, 15857},
		// LM Studio, older message.
		{"lmstudio n_keep", 400,
			`{"error":"The number of tokens to keep from the initial prompt is greater than the context length. Try to load the model with a larger context length, or provide a shorter input"}`,
			true, "lmstudio", 0, 0},
		// Ollama /api/chat with truncate:false: its runner's error as a string.
		{"ollama truncate false", 400,
			`{"error":"{\"error\":{\"code\":400,\"message\":\"request (8889 tokens) exceeds the available context size (4096 tokens), try increasing it\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":8889,\"n_ctx\":4096}}"}`,
			true, "ollama", 4096, 8889},
		// Ollama /api/chat with shift:false.
		{"ollama shift false", 400,
			`{"error":"the prompt is longer than the context length currently available to the model; increase num_ctx or use truncate"}`,
			true, "ollama", 0, 0},
		// Ollama /api/embed with truncate:false.
		{"ollama embed", 400,
			`{"error":"the input length exceeds the context length"}`,
			true, "ollama", 0, 0},
		// No body at all.
		{"bodiless 400", 400, ``, true, "", 0, 0},
		{"bodiless 413", 413, "  \n", true, "", 0, 0},
		// A proxy's HTML 413.
		{"proxy 413 html", 413, `<html><head><title>413 Request Entity Too Large</title></head><body>nginx</body></html>`, true, "", 0, 0},

		// Not overflows.
		// OpenAI, 429 tokens-per-minute.
		{"openai 429 tpm", 429,
			`{"error":{"message":"Request too large for gpt-4o in organization org-VDAWofJASuLH0vVz8o9tiQZr on tokens per min (TPM): Limit 30000, Requested 30601. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			false, "", 0, 0},
		// Groq, 413 tokens-per-minute: a rate limit despite the status.
		{"groq 413 tpm", 413,
			"{\"error\":{\"message\":\"Request too large for model `llama-3.3-70b-versatile` in organization `org_01jp8byqwpfx9sp1m0dbhb6a1e` service tier `on_demand` on tokens per minute (TPM): Limit 6000, Requested 14810, please reduce your message size and try again. Visit https://console.groq.com/docs/rate-limits for more information.\",\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}",
			false, "", 0, 0},
		// Anthropic, 429 rate_limit_error that mentions the prompt length.
		{"anthropic 429", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 20,000 input tokens per minute. Please reduce the prompt length or the maximum tokens requested, or try again later."}}`,
			false, "", 0, 0},
		// Anthropic, 529 overloaded.
		{"anthropic 529", 529,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			false, "", 0, 0},
		// Anthropic, 500 api_error.
		{"anthropic 500", 500,
			`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
			false, "", 0, 0},
		// Bedrock, 429 ThrottlingException.
		{"bedrock throttling", 429,
			`{"message":"Too many tokens, please wait before trying again."}`,
			false, "", 0, 0},
		// Bedrock throttling seen through a relay that answers 400.
		{"bedrock throttling relayed", 400,
			`{"message":"ThrottlingException: Too many tokens, please wait before trying again."}`,
			false, "", 0, 0},
		// Azure OpenAI, 429.
		{"azure 429", 429,
			`{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-08-01-preview have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 86400 seconds."}}`,
			false, "", 0, 0},
		// Gemini, 429 RESOURCE_EXHAUSTED.
		{"gemini 429", 429,
			`{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`,
			false, "", 0, 0},
		// Anthropic, 401.
		{"anthropic 401", 401,
			`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			false, "", 0, 0},
		// OpenAI, 401.
		{"openai 401", 401,
			`{"error":{"message":"Incorrect API key provided: sk-xxxx. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			false, "", 0, 0},
		// OpenAI, 400 unrelated to size.
		{"openai bad model", 404,
			`{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			false, "", 0, 0},
		// A 400 about something else.
		{"anthropic other 400", 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"messages: text content blocks must be non-empty"}}`,
			false, "", 0, 0},
		// A bare 502 from a gateway.
		{"bodiless 502", 502, ``, false, "", 0, 0},
		// Overflow wording inside a 503 without a structured code.
		{"503 with overflow words", 503,
			`{"error":{"message":"upstream failed: prompt is too long"}}`,
			false, "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.status, []byte(tt.body))
			want := Result{Overflow: tt.overflow, Provider: tt.provider, ContextWindow: tt.window, Requested: tt.requested}
			got.Reason = ""
			if got != want {
				t.Errorf("Classify(%d, ...) = %+v, want %+v", tt.status, got, want)
			}
			if r := Classify(tt.status, []byte(tt.body)); r.Overflow && r.Reason == "" {
				t.Error("an overflow without a reason")
			}
		})
	}
}

func TestClassifyInferredReason(t *testing.T) {
	for _, tt := range []struct {
		status   int
		body     string
		inferred bool
	}{
		{400, "", true},
		{413, "Request Entity Too Large", true},
		{400, `{"error":{"message":"prompt is too long: 3 tokens > 2 maximum"}}`, false},
	} {
		got := Classify(tt.status, []byte(tt.body))
		if !got.Overflow || strings.Contains(got.Reason, "inferred") != tt.inferred {
			t.Errorf("Classify(%d, %q) = %+v, want an overflow, inferred=%v", tt.status, tt.body, got, tt.inferred)
		}
	}
}

func TestSilent(t *testing.T) {
	for _, tt := range []struct {
		reported, window int
		want             bool
	}{
		{200001, 200000, true},
		{200000, 200000, false},
		{150000, 200000, false},
		{500000, 0, false},  // unknown window
		{500000, -1, false}, // unknown window
	} {
		if got := Silent(tt.reported, tt.window); got != tt.want {
			t.Errorf("Silent(%d, %d) = %v, want %v", tt.reported, tt.window, got, tt.want)
		}
	}
}
