// Package provider calls the model that writes summaries: Anthropic's
// Messages API or any OpenAI-compatible Chat Completions endpoint (OpenAI,
// Azure-style gateways, OpenRouter, a local Ollama, vLLM, llama.cpp or LM
// Studio server), with net/http and the two request shapes it needs.
//
// One Client makes one kind of call, a non-streaming completion of a
// system prompt and a conversation rendered as text, which is what a
// summarization needs. Tool calls, tool results and images in the
// conversation are rendered as text; thinking blocks are left out.
//
// Retries live in this package, so the two providers behave the same: 429
// and 5xx responses and lost connections are retried with exponential
// backoff and jitter, honouring Retry-After; context overflows and other
// 4xx responses never are. Each attempt has its own timeout (Config.Timeout) and the
// caller's context bounds the whole call. A failed call returns an *Error
// (HTTP status, code, raw body), a *TimeoutError, an *EmptyCompletionError,
// or the caller's context error.
package provider
