// Package overflow recognises context-overflow errors: a model call that
// failed because the prompt did not fit the model's context window.
//
// The host compacts and retries once when a call overflows, so telling an
// overflow apart from a rate limit, an authentication failure or a server
// error matters: compacting on a rate limit wastes a summarization call, and
// retrying an overflow unchanged fails again. Classify works on an HTTP
// status and a response body; FromError works on an error, whether it is a
// *provider.Error, an error of the caller's own that implements HTTPError,
// or any other error whose text carries the status and the provider's
// message, as the errors of the official Anthropic and OpenAI Go SDKs do.
// The package imports no SDK: it needs only a status, a code and a body.
//
// Recognised, with the messages and codes the providers return: Anthropic
// (also through Bedrock and Vertex), OpenAI and Azure OpenAI, Google Gemini,
// Amazon Bedrock, Mistral, Groq, OpenRouter, xAI, DeepSeek, vLLM, llama.cpp,
// LM Studio and Ollama. A 413, or a 400 without a body, is taken as an
// overflow too, with a Reason that says it was inferred.
//
// Never an overflow: rate limits and throttling (any 429, codes such as
// rate_limit_exceeded, Bedrock's "Too many tokens, please wait before trying
// again"), authentication and permission errors (401, 403), and 5xx responses
// unless the body carries a structured overflow code (llama.cpp builds before
// September 2025 answered an overflow with a 500 and exceed_context_size_error).
//
// A silent overflow, a call that succeeded with more input than the window,
// shows only in the usage the provider reports: see Silent.
package overflow
