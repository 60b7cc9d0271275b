package provider

import (
	"context"
	"net/http"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

const (
	anthropicBaseURL = "https://api.anthropic.com"
	// anthropicVersion is the Messages API version the request and
	// response shapes below follow.
	anthropicVersion = "2023-06-01"
)

type anthropicBackend struct {
	hc     *http.Client
	url    string
	header http.Header
}

func newAnthropic(cfg Config) *anthropicBackend {
	base := cfg.BaseURL
	if base == "" {
		base = anthropicBaseURL
	}
	h := http.Header{}
	h.Set("anthropic-version", anthropicVersion)
	if cfg.APIKey != "" {
		h.Set("x-api-key", cfg.APIKey)
	}
	return &anthropicBackend{hc: cfg.HTTPClient, url: strings.TrimRight(base, "/") + "/v1/messages", header: h}
}

// The Messages API request and response, as far as a summary needs them.
type (
	anthropicText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	anthropicMessage struct {
		Role    string          `json:"role"`
		Content []anthropicText `json:"content"`
	}
	anthropicRequest struct {
		Model     string             `json:"model"`
		MaxTokens int                `json:"max_tokens"`
		System    []anthropicText    `json:"system,omitempty"`
		Messages  []anthropicMessage `json:"messages"`
	}
	anthropicResponse struct {
		Model      string          `json:"model"`
		Content    []anthropicText `json:"content"`
		StopReason string          `json:"stop_reason"`
		Usage      struct {
			InputTokens              int `json:"input_tokens"`
			OutputTokens             int `json:"output_tokens"`
			CacheReadInputTokens     int `json:"cache_read_input_tokens"`
			CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	}
)

func (b *anthropicBackend) send(ctx context.Context, model string, p prompt, maxTokens int, ex *exchange) (*abi.CompleteResponse, error) {
	req := anthropicRequest{Model: model, MaxTokens: maxTokens, Messages: make([]anthropicMessage, 0, len(p.turns))}
	if p.system != "" {
		req.System = []anthropicText{{Type: "text", Text: p.system}}
	}
	for _, t := range p.turns {
		role := abi.RoleUser
		if t.role == abi.RoleAssistant {
			role = abi.RoleAssistant
		}
		req.Messages = append(req.Messages, anthropicMessage{Role: role, Content: []anthropicText{{Type: "text", Text: t.text}}})
	}
	var msg anthropicResponse
	if err := ex.post(ctx, b.hc, b.url, b.header, req, &msg); err != nil {
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
		InputTokens:      msg.Usage.InputTokens,
		OutputTokens:     msg.Usage.OutputTokens,
		CacheReadTokens:  msg.Usage.CacheReadInputTokens,
		CacheWriteTokens: msg.Usage.CacheCreationInputTokens,
	}
	got := msg.Model
	if got == "" {
		got = model
	}
	if strings.TrimSpace(text.String()) == "" {
		return nil, &EmptyCompletionError{Provider: KindAnthropic, Model: got, StopReason: msg.StopReason, Usage: usage}
	}
	return &abi.CompleteResponse{Text: text.String(), Usage: usage, Model: got}, nil
}
