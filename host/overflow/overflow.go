package overflow

import (
	"bytes"
	"context"
	"errors"
)

// Result is what Classify and FromError found.
type Result struct {
	// Overflow is true when the request did not fit the context window.
	Overflow bool
	// Provider names the family whose message matched ("anthropic",
	// "openai", "gemini", "bedrock", "mistral", "groq", "openrouter", "xai",
	// "vllm", "llama.cpp", "lmstudio", "ollama", or "openai-compatible" for
	// the message OpenAI, Azure, DeepSeek and vLLM share). It is a hint
	// from the text, not proof of who answered; empty when unknown.
	Provider string
	// Reason says in a few words why the result is what it is, for logs
	// and events. It is set for non-overflows too when the error was
	// recognised (for example as a rate limit).
	Reason string
	// ContextWindow is the window the error states, in tokens (llama.cpp's
	// n_ctx, "maximum context length is N tokens"); 0 when not stated.
	ContextWindow int
	// Requested is the prompt size the error states, in tokens; 0 when
	// not stated.
	Requested int
}

// HTTPError is implemented by errors that carry the HTTP response of a
// failed model call; *provider.Error does. Agents that call providers with
// their own HTTP code can implement it to have FromError read the real
// status and body.
type HTTPError interface {
	error
	HTTPStatus() int
	HTTPBody() []byte
}

// Classify reports whether a response with the given HTTP status and body
// is a context overflow. status may be 0 when unknown.
func Classify(status int, body []byte) Result {
	trimmed := bytes.TrimSpace(body)
	d := parseBody(trimmed)
	return decide(status, d, len(trimmed) == 0)
}

// FromError reports whether err is a context overflow. It looks for an
// HTTPError in err's chain, then reads the text of err (a status such as
// "status 400", "Error code: 400" or `POST "...": 400 Bad Request` and any
// JSON in it are used). The errors of the official Anthropic and OpenAI Go
// SDKs print their status and the provider's JSON, so they are read
// without this package importing the SDKs. Context cancellation and
// deadlines are never overflows.
func FromError(err error) Result {
	if err == nil {
		return Result{}
	}
	var he HTTPError
	if errors.As(err, &he) {
		return Classify(he.HTTPStatus(), he.HTTPBody())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Result{Reason: "cancelled or timed out, not an overflow"}
	}
	return fromText(err.Error())
}

// Silent reports a silent overflow: a call that succeeded although the
// provider counted more input tokens than the context window the host
// believes the model has. The next, larger call will overflow, and the
// window the host works with is wrong; either way the host compacts.
// reportedInputTokens should be the whole prompt the provider counted
// (abi.Usage.PromptTokens: fresh input plus cache reads and writes). A
// contextWindow of 0 or less means unknown and never reports an overflow.
func Silent(reportedInputTokens, contextWindow int) bool {
	return contextWindow > 0 && reportedInputTokens > contextWindow
}
