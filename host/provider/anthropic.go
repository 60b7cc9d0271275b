package provider

import (
	"context"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/compact-host/compact-host/abi"
)

type anthropicBackend struct {
	client  anthropic.Client
	timeout time.Duration
}

func newAnthropic(cfg Config) *anthropicBackend {
	opts := []option.RequestOption{
		// The SDK otherwise reads ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,
		// profiles and custom headers from the environment; FromEnv is
		// the one place the host reads the environment.
		option.WithoutEnvironmentDefaults(),
		option.WithMaxRetries(0),
		option.WithHTTPClient(cfg.HTTPClient),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &anthropicBackend{client: anthropic.NewClient(opts...), timeout: cfg.Timeout}
}

func (b *anthropicBackend) send(ctx context.Context, model string, p prompt, maxTokens int, mw middleware) (*abi.CompleteResponse, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: int64(maxTokens),
		Messages:  make([]anthropic.MessageParam, 0, len(p.turns)),
	}
	if p.system != "" {
		params.System = []anthropic.TextBlockParam{{Text: p.system}}
	}
	for _, t := range p.turns {
		block := anthropic.NewTextBlock(t.text)
		if t.role == abi.RoleAssistant {
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(block))
		} else {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(block))
		}
	}
	// The per-attempt context already bounds the call. The explicit
	// request timeout is passed as well because without one the SDK
	// refuses non-streaming calls whose max_tokens it expects to take
	// longer than ten minutes.
	msg, err := b.client.Messages.New(ctx, params, option.WithMiddleware(mw), option.WithRequestTimeout(b.timeout))
	if err != nil {
		return nil, err
	}
	var text strings.Builder
	for _, c := range msg.Content {
		if c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	// Anthropic's input_tokens excludes the prompt-cache reads and writes,
	// which it reports apart; abi.Usage keeps the same split, so
	// PromptTokens (the sum) is the whole prompt Anthropic counted.
	usage := abi.Usage{
		InputTokens:      int(msg.Usage.InputTokens),
		OutputTokens:     int(msg.Usage.OutputTokens),
		CacheReadTokens:  int(msg.Usage.CacheReadInputTokens),
		CacheWriteTokens: int(msg.Usage.CacheCreationInputTokens),
	}
	got := string(msg.Model)
	if got == "" {
		got = model
	}
	if strings.TrimSpace(text.String()) == "" {
		return nil, &EmptyCompletionError{Provider: KindAnthropic, Model: got, StopReason: string(msg.StopReason), Usage: usage}
	}
	return &abi.CompleteResponse{Text: text.String(), Usage: usage, Model: got}, nil
}
