package provider_test

import (
	"errors"
	"testing"

	"github.com/compact-host/compact-host/host/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		want  provider.Config
		noKey bool
		fails bool
	}{
		{"nothing set", map[string]string{}, provider.Config{}, true, true},
		{"anthropic key", map[string]string{"ANTHROPIC_API_KEY": "sk-ant"},
			provider.Config{Kind: "anthropic", APIKey: "sk-ant", Model: provider.DefaultAnthropicModel}, false, false},
		{"openai key", map[string]string{"OPENAI_API_KEY": "sk-oa"},
			provider.Config{Kind: "openai", APIKey: "sk-oa", Model: provider.DefaultOpenAIModel}, false, false},
		{"both keys: anthropic first", map[string]string{"ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oa"},
			provider.Config{Kind: "anthropic", APIKey: "sk-ant", Model: provider.DefaultAnthropicModel}, false, false},
		{"explicit provider wins", map[string]string{"COMPACT_HOST_PROVIDER": "OpenAI", "ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oa"},
			provider.Config{Kind: "openai", APIKey: "sk-oa", Model: provider.DefaultOpenAIModel}, false, false},
		{"explicit provider without its key", map[string]string{"COMPACT_HOST_PROVIDER": "openai", "ANTHROPIC_API_KEY": "sk-ant"},
			provider.Config{}, true, true},
		{"local server, no key", map[string]string{"OPENAI_BASE_URL": "http://localhost:11434/v1", "OPENAI_MODEL": "llama3.2"},
			provider.Config{Kind: "openai", BaseURL: "http://localhost:11434/v1", Model: "llama3.2"}, false, false},
		{"local server needs a model", map[string]string{"OPENAI_BASE_URL": "http://localhost:8000/v1"},
			provider.Config{}, false, true},
		{"anthropic gateway, no key", map[string]string{"ANTHROPIC_BASE_URL": "http://gateway:8080", "ANTHROPIC_MODEL": "claude-x"},
			provider.Config{Kind: "anthropic", BaseURL: "http://gateway:8080", Model: "claude-x"}, false, false},
		{"generic model wins", map[string]string{"ANTHROPIC_API_KEY": "sk-ant", "ANTHROPIC_MODEL": "a", "COMPACT_HOST_MODEL": "b", "COMPACT_HOST_COMPACTION_MODEL": "c"},
			provider.Config{Kind: "anthropic", APIKey: "sk-ant", Model: "b", CompactionModel: "c"}, false, false},
		{"unknown provider", map[string]string{"COMPACT_HOST_PROVIDER": "gemini", "ANTHROPIC_API_KEY": "sk-ant"},
			provider.Config{}, false, true},
		{"blank values are unset", map[string]string{"ANTHROPIC_API_KEY": "  ", "OPENAI_API_KEY": "sk-oa"},
			provider.Config{Kind: "openai", APIKey: "sk-oa", Model: provider.DefaultOpenAIModel}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := provider.FromEnv(func(k string) string { return tt.env[k] })
			require.Equal(t, tt.fails, err != nil, "FromEnv error = %v", err)
			assert.Equal(t, tt.noKey, errors.Is(err, provider.ErrNoKey), "errors.Is(err, ErrNoKey) for %v", err)
			assert.Equal(t, tt.want, got)
		})
	}
}
