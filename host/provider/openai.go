package provider

import (
	"context"
	"net/http"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

const openAIBaseURL = "https://api.openai.com/v1"

type openAIBackend struct {
	hc     *http.Client
	url    string
	header http.Header
	// legacyMaxTokens sends max_tokens instead of max_completion_tokens.
	// OpenAI deprecated max_tokens and its reasoning models reject it;
	// the compatible servers (Ollama, vLLM, llama.cpp, LM Studio,
	// OpenRouter) all take max_tokens and not all take the newer name.
	legacyMaxTokens bool
}

func newOpenAI(cfg Config) *openAIBackend {
	url, h := openAIEndpoint(cfg, "/chat/completions")
	return &openAIBackend{
		hc:              cfg.HTTPClient,
		url:             url,
		header:          h,
		legacyMaxTokens: !officialOpenAI(cfg.BaseURL),
	}
}

// openAIEndpoint is the URL of one of OpenAI's APIs under cfg's base, and
// the header that carries cfg's key.
func openAIEndpoint(cfg Config, path string) (string, http.Header) {
	base := cfg.BaseURL
	if base == "" {
		base = openAIBaseURL
	}
	h := http.Header{}
	if cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	return strings.TrimRight(base, "/") + path, h
}

// The Chat Completions request and response, as far as a summary needs
// them.
type (
	openAIMessage struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	openAIRequest struct {
		Model               string          `json:"model"`
		Messages            []openAIMessage `json:"messages"`
		MaxTokens           int             `json:"max_tokens,omitempty"`
		MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	}
	openAIResponse struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
				Refusal string `json:"refusal"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
)

func (b *openAIBackend) send(ctx context.Context, model string, p prompt, maxTokens int, ex *exchange) (*abi.CompleteResponse, error) {
	req := openAIRequest{Model: model, Messages: make([]openAIMessage, 0, len(p.turns)+1)}
	if b.legacyMaxTokens {
		req.MaxTokens = maxTokens
	} else {
		req.MaxCompletionTokens = maxTokens
	}
	if p.system != "" {
		req.Messages = append(req.Messages, openAIMessage{Role: abi.RoleSystem, Content: p.system})
	}
	for _, t := range p.turns {
		role := abi.RoleUser
		if t.role == abi.RoleAssistant {
			role = abi.RoleAssistant
		}
		req.Messages = append(req.Messages, openAIMessage{Role: role, Content: t.text})
	}
	var comp openAIResponse
	if err := ex.post(ctx, b.hc, b.url, b.header, req, &comp); err != nil {
		return nil, err
	}
	// OpenAI's prompt_tokens includes the cached prefix that
	// prompt_tokens_details.cached_tokens reports. abi.Usage counts
	// fresh input and cache reads apart and PromptTokens adds them, so
	// the cached tokens are taken out of InputTokens: PromptTokens then
	// equals prompt_tokens, what OpenAI counted. OpenAI reports no cache
	// writes. A server that reports more cached than prompt tokens is
	// clamped rather than trusted.
	prompt := comp.Usage.PromptTokens
	cached := min(max(comp.Usage.PromptTokensDetails.CachedTokens, 0), prompt)
	usage := abi.Usage{
		InputTokens:     prompt - cached,
		OutputTokens:    comp.Usage.CompletionTokens,
		CacheReadTokens: cached,
	}
	got := comp.Model
	if got == "" {
		got = model
	}
	if len(comp.Choices) == 0 {
		return nil, &EmptyCompletionError{Provider: KindOpenAI, Model: got, Usage: usage}
	}
	choice := comp.Choices[0]
	text := choice.Message.Content
	if strings.TrimSpace(text) == "" {
		reason := choice.FinishReason
		if choice.Message.Refusal != "" {
			reason = "refusal"
		}
		return nil, &EmptyCompletionError{Provider: KindOpenAI, Model: got, StopReason: reason, Usage: usage}
	}
	return &abi.CompleteResponse{Text: text, Usage: usage, Model: got}, nil
}
