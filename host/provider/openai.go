package provider

import (
	"context"
	"strings"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"

	"github.com/compact-host/compact-host/abi"
)

const openAIBaseURL = "https://api.openai.com/v1/"

type openAIBackend struct {
	svc openai.ChatCompletionService
	// legacyMaxTokens sends max_tokens instead of max_completion_tokens.
	// OpenAI deprecated max_tokens and its reasoning models reject it;
	// the compatible servers (Ollama, vLLM, llama.cpp, LM Studio,
	// OpenRouter) all take max_tokens and not all take the newer name.
	legacyMaxTokens bool
}

func newOpenAI(cfg Config) *openAIBackend {
	base := cfg.BaseURL
	if base == "" {
		base = openAIBaseURL
	}
	// The service is built directly rather than through openai.NewClient,
	// which reads OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_ORG_ID and
	// OPENAI_PROJECT_ID from the environment; FromEnv is the one place
	// the host reads the environment.
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
		option.WithHTTPClient(cfg.HTTPClient),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &openAIBackend{
		svc:             openai.NewChatCompletionService(opts...),
		legacyMaxTokens: !officialOpenAI(cfg.BaseURL),
	}
}

func (b *openAIBackend) send(ctx context.Context, model string, p prompt, maxTokens int, mw middleware) (*abi.CompleteResponse, error) {
	params := openai.ChatCompletionNewParams{
		Model:    model,
		Messages: make([]openai.ChatCompletionMessageParamUnion, 0, len(p.turns)+1),
	}
	if b.legacyMaxTokens {
		params.MaxTokens = openai.Int(int64(maxTokens))
	} else {
		params.MaxCompletionTokens = openai.Int(int64(maxTokens))
	}
	if p.system != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(p.system))
	}
	for _, t := range p.turns {
		if t.role == abi.RoleAssistant {
			params.Messages = append(params.Messages, openai.AssistantMessage(t.text))
		} else {
			params.Messages = append(params.Messages, openai.UserMessage(t.text))
		}
	}
	comp, err := b.svc.New(ctx, params, option.WithMiddleware(mw))
	if err != nil {
		return nil, err
	}
	// OpenAI's prompt_tokens includes the cached prefix that
	// prompt_tokens_details.cached_tokens reports. abi.Usage counts
	// fresh input and cache reads apart and PromptTokens adds them, so
	// the cached tokens are taken out of InputTokens: PromptTokens then
	// equals prompt_tokens, what OpenAI counted. OpenAI reports no cache
	// writes. A server that reports more cached than prompt tokens is
	// clamped rather than trusted.
	prompt := int(comp.Usage.PromptTokens)
	cached := min(max(int(comp.Usage.PromptTokensDetails.CachedTokens), 0), prompt)
	usage := abi.Usage{
		InputTokens:     prompt - cached,
		OutputTokens:    int(comp.Usage.CompletionTokens),
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
