package overflow

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// rule matches one provider's overflow message. Patterns are matched
// against the lower-cased messages; window and requested are submatch
// indexes of the numbers the message states (0 when it states none).
type rule struct {
	provider  string
	re        *regexp.Regexp
	window    int
	requested int
	reason    string
}

// num matches a token count, with thousands separators when a provider
// writes them.
const num = `(\d[\d,]*)`

// rules are tried in order; the first match wins, so the ones that state
// numbers come before the bare phrase of the same provider.
var rules = []rule{
	// Anthropic (also behind Bedrock and Vertex): 400 invalid_request_error.
	{"anthropic", re(`prompt is too long: ` + num + ` tokens > ` + num + ` maximum`), 2, 1, "prompt is too long"},
	{"anthropic", re("input length and `?max_tokens`? exceed context limit: " + num + ` \+ ` + num + ` > ` + num), 3, 1, "input length and max_tokens exceed the context limit"},
	{"anthropic", re(`prompt is too long`), 0, 0, "prompt is too long"},
	{"anthropic", re(`request size exceeds model context window`), 0, 0, "request size exceeds the model context window"},
	// Gemini: 400 INVALID_ARGUMENT.
	{"gemini", re(`input token count \(` + num + `\) exceeds the maximum number of tokens allowed \(` + num + `\)`), 2, 1, "input token count exceeds the maximum"},
	{"gemini", re(`input token count exceeds the maximum number of tokens allowed \(?` + num), 1, 0, "input token count exceeds the maximum"},
	{"gemini", re(`input token count.*exceeds the maximum number of tokens`), 0, 0, "input token count exceeds the maximum"},
	// Mistral: 400 invalid_request_message_error and similar types.
	{"mistral", re(`prompt contains ` + num + ` tokens(?: and \d+ draft tokens)?, too large for model with ` + num + ` maximum context length`), 2, 1, "prompt too large for the model's context length"},
	// xAI: 400 "Client specified an invalid argument".
	{"xai", re(`maximum prompt length is ` + num + ` but the request contains ` + num + ` tokens`), 1, 2, "prompt longer than the maximum prompt length"},
	{"xai", re(`maximum prompt length is ` + num), 1, 0, "prompt longer than the maximum prompt length"},
	// OpenRouter: 400 with code 400.
	{"openrouter", re(`endpoint's maximum context length is ` + num + ` tokens\. however, you requested about ` + num), 1, 2, "request exceeds the endpoint's maximum context length"},
	{"openrouter", re(`endpoint's maximum context length is ` + num), 1, 0, "request exceeds the endpoint's maximum context length"},
	// OpenAI, Azure OpenAI, DeepSeek, vLLM: the message they share. The
	// requested count, when stated, is read by requestedRe.
	{"openai-compatible", re(`maximum context length is ` + num + ` tokens`), 1, 0, "maximum context length exceeded"},
	// OpenAI (Responses API and newer models).
	{"openai", re(`input exceeds the context window of this model`), 0, 0, "input exceeds the context window"},
	// vLLM (engine-level validation) and SGLang-style servers.
	{"vllm", re(`decoder prompt \(length ` + num + `\) (?:plus the number of requested output tokens \(at least \d+\) )?is longer than the maximum model length of ` + num), 2, 1, "prompt longer than the maximum model length"},
	{"vllm", re(`prompt length of ` + num + ` is longer than the maximum model length of ` + num), 2, 1, "prompt longer than the maximum model length"},
	{"vllm", re(`input \(` + num + ` tokens\) is longer than the model's context length \(` + num + ` tokens\)`), 2, 1, "input longer than the model's context length"},
	{"vllm", re(`is longer than the (?:model's context length|maximum model length)`), 0, 0, "input longer than the model's context length"},
	// llama.cpp server: exceed_context_size_error (numbers also come as
	// n_prompt_tokens and n_ctx, which take precedence).
	{"llama.cpp", re(`request \(` + num + ` tokens\) exceeds the available context size \(` + num + ` tokens\)`), 2, 1, "request exceeds the available context size"},
	{"llama.cpp", re(`exceeds the available context size`), 0, 0, "request exceeds the available context size"},
	// LM Studio (llama.cpp and MLX engines).
	{"lmstudio", re(`trying to keep the first ` + num + ` tokens when context the overflows\. however, the model is loaded with context length of only ` + num + ` tokens`), 2, 1, "prompt longer than the loaded context length"},
	{"lmstudio", re(`cannot truncate prompt with n_keep \(` + num + `\) >= n_ctx \(` + num + `\)`), 2, 0, "prompt longer than the loaded context length"},
	{"lmstudio", re(`greater than the context length`), 0, 0, "prompt longer than the loaded context length"},
	{"lmstudio", re(`context size has been exceeded`), 0, 0, "context size exceeded"},
	// Ollama: truncate:false and shift:false on /api/chat, and /api/embed.
	{"ollama", re(`input length exceeds the context length`), 0, 0, "input length exceeds the context length"},
	{"ollama", re(`prompt is longer than the context length`), 0, 0, "prompt longer than the context length"},
	{"ollama", re(`prompt too long; exceeded (?:max )?context length`), 0, 0, "prompt exceeded the context length"},
	// Amazon Bedrock: ValidationException.
	{"bedrock", re(`input is too long for requested model`), 0, 0, "input is too long for the requested model"},
	{"bedrock", re(`too many input tokens`), 0, 0, "too many input tokens"},
	// Groq (code context_length_exceeded, with no numbers in the message).
	{"groq", re(`please reduce the length of the messages or completion`), 0, 0, "messages too long for the context window"},
	// Generic phrasing from gateways and proxies.
	{"", re(`context[_ ]length[_ ]exceeded`), 0, 0, "context length exceeded"},
	{"", re(`exceeds the (?:model's )?context window`), 0, 0, "input exceeds the context window"},
}

// requestedRe reads the prompt size from the shared OpenAI-style message:
// "your messages resulted in N tokens" (OpenAI, Azure), "you requested N
// tokens" (DeepSeek, older vLLM), "your request has N input tokens" (vLLM).
var requestedRe = re(`(?:your messages resulted in|you requested(?: about)?|your request has) ` + num + ` (?:input )?tokens`)

// rateLimitCodes and rateLimitPhrases mark rate limits and throttling,
// which are checked before anything else: OpenAI's and Groq's "Request too
// large ... on tokens per minute (TPM)" (429 or 413, code
// rate_limit_exceeded) and Anthropic's "would exceed the rate limit ...
// reduce the prompt length" read like overflows but are not.
var rateLimitCodes = []string{
	"rate_limit_exceeded", "rate_limit_error", "ratelimiterror", "tokens", "requests",
	"throttlingexception", "throttling_error", "throttled", "resource_exhausted",
	"insufficient_quota", "too_many_requests",
}

var rateLimitPhrases = []string{
	"rate limit", "rate_limit", "ratelimit", "throttl", "please wait before trying again",
	"tokens per min", "tokens per day", "requests per min", "requests per day", "(tpm)", "(rpm)",
	"too many requests", "quota", "resource has been exhausted",
}

var authCodes = []string{"authentication_error", "permission_error", "invalid_api_key", "unauthenticated", "permission_denied"}

// structuredCodes are codes and types that say "overflow" on their own.
var structuredCodes = map[string]string{
	"context_length_exceeded":   "openai",
	"exceed_context_size_error": "llama.cpp",
	"request_too_large":         "anthropic",
}

func re(s string) *regexp.Regexp { return regexp.MustCompile(s) }

func atoi(s string) int {
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// match runs the rules over the lower-cased text.
func match(text string) (rule, []string, bool) {
	for _, r := range rules {
		if m := r.re.FindStringSubmatch(text); m != nil {
			return r, m, true
		}
	}
	return rule{}, nil, false
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// decide turns what was found in a body into a Result.
func decide(status int, d details, empty bool) Result {
	text := strings.ToLower(strings.Join(d.messages, "\n"))

	if status == 429 || d.hasCode(rateLimitCodes...) || containsAny(text, rateLimitPhrases) {
		return Result{Reason: "rate limit or throttling, not an overflow"}
	}
	if status == 401 || status == 403 || d.hasCode(authCodes...) {
		return Result{Reason: "authentication or permission error, not an overflow"}
	}

	var res Result
	structured := ""
	for _, c := range d.codes {
		if p, ok := structuredCodes[c]; ok {
			structured = c
			res.Provider = p
			break
		}
	}
	r, m, matched := match(text)
	if status >= 500 && structured == "" {
		// A server error says nothing about the prompt, whatever the
		// text; only a structured code overrides the status.
		return Result{Reason: fmt.Sprintf("HTTP %d server error, not an overflow", status)}
	}

	switch {
	case structured != "" || matched:
		res.Overflow = true
		if matched {
			if r.window > 0 {
				res.ContextWindow = atoi(m[r.window])
			}
			if r.requested > 0 {
				res.Requested = atoi(m[r.requested])
			}
			if res.Requested == 0 && r.provider == "openai-compatible" {
				if rm := requestedRe.FindStringSubmatch(text); rm != nil {
					res.Requested = atoi(rm[1])
				}
			}
		}
		res.Provider, res.Reason = attribute(structured, r, matched, d)
	case status == 413:
		return Result{Overflow: true, Reason: "inferred from HTTP 413: the request is too large"}
	case status == 400 && empty:
		return Result{Overflow: true, Reason: "inferred from HTTP 400 with no body"}
	default:
		return Result{}
	}
	if d.nCtx > 0 {
		res.ContextWindow = d.nCtx
	}
	if d.nPrompt > 0 {
		res.Requested = d.nPrompt
	}
	return res
}

// attribute names the provider family and the reason of an overflow.
func attribute(structured string, r rule, matched bool, d details) (provider, reason string) {
	switch structured {
	case "exceed_context_size_error":
		if d.nested {
			// Ollama passes its llama.cpp runner's error on as a string.
			return "ollama", "prompt exceeds the available context size (exceed_context_size_error)"
		}
		return "llama.cpp", "prompt exceeds the available context size (exceed_context_size_error)"
	case "request_too_large":
		if !matched {
			return "anthropic", "request exceeds the maximum request size (request_too_large)"
		}
	case "context_length_exceeded":
		if !matched {
			return "openai", "context length exceeded (context_length_exceeded)"
		}
		if r.provider == "openai-compatible" {
			// Only OpenAI and Azure send the code with this message.
			return "openai", r.reason + " (context_length_exceeded)"
		}
		return r.provider, r.reason + " (context_length_exceeded)"
	}
	provider = r.provider
	if provider == "openai-compatible" && (d.object == "error" || d.hasCode("badrequesterror")) {
		provider = "vllm"
	}
	return provider, r.reason
}
