package provider

import (
	"fmt"
	"os"
	"strings"
)

// Environment variables FromEnv reads. The provider-specific ones are the
// names the official SDKs and most agents already use.
const (
	EnvProvider         = "COMPACT_HOST_PROVIDER"         // "anthropic" or "openai"
	EnvModel            = "COMPACT_HOST_MODEL"            // the model
	EnvCompactionModel  = "COMPACT_HOST_COMPACTION_MODEL" // optional cheaper model for summaries
	EnvAnthropicKey     = "ANTHROPIC_API_KEY"
	EnvAnthropicBaseURL = "ANTHROPIC_BASE_URL"
	EnvAnthropicModel   = "ANTHROPIC_MODEL"
	EnvOpenAIKey        = "OPENAI_API_KEY"
	EnvOpenAIBaseURL    = "OPENAI_BASE_URL"
	EnvOpenAIModel      = "OPENAI_MODEL"
)

// Default models on the providers' public APIs. A compatible server
// (OPENAI_BASE_URL) has no default: its models are whatever it serves.
var (
	DefaultAnthropicModel = "claude-sonnet-4-5"
	DefaultOpenAIModel    = "gpt-4.1-mini"
)

// FromEnv builds a Config from the environment; getenv is os.Getenv when
// nil. Timeouts and retries keep their defaults; set them on the returned
// Config before calling New.
//
// The provider is, in order of precedence:
//  1. COMPACT_HOST_PROVIDER, when set ("anthropic" or "openai");
//  2. anthropic, when ANTHROPIC_API_KEY is set;
//  3. openai, when OPENAI_API_KEY is set;
//  4. openai, when OPENAI_BASE_URL is set (a local server needs no key);
//  5. anthropic, when ANTHROPIC_BASE_URL is set (a gateway that needs none).
//
// Otherwise FromEnv returns an error wrapping ErrNoKey, and the host runs
// offline. The chosen provider's key and base URL come from its variables
// (ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL, or OPENAI_API_KEY and
// OPENAI_BASE_URL); a chosen provider with neither is ErrNoKey too.
//
// The model is COMPACT_HOST_MODEL, else ANTHROPIC_MODEL or OPENAI_MODEL
// for the chosen provider, else DefaultAnthropicModel or
// DefaultOpenAIModel on the public APIs; a compatible server with no model
// set is an error. COMPACT_HOST_COMPACTION_MODEL, when set, is the model
// summaries use.
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }

	var cfg Config
	switch p := strings.ToLower(env(EnvProvider)); {
	case p == KindAnthropic || p == KindOpenAI:
		cfg.Kind = p
	case p != "":
		return Config{}, fmt.Errorf("provider: %s=%q; want %q or %q", EnvProvider, p, KindAnthropic, KindOpenAI)
	case env(EnvAnthropicKey) != "":
		cfg.Kind = KindAnthropic
	case env(EnvOpenAIKey) != "":
		cfg.Kind = KindOpenAI
	case env(EnvOpenAIBaseURL) != "":
		cfg.Kind = KindOpenAI
	case env(EnvAnthropicBaseURL) != "":
		cfg.Kind = KindAnthropic
	default:
		return Config{}, fmt.Errorf("%w: set %s or %s, or %s for a local server", ErrNoKey, EnvAnthropicKey, EnvOpenAIKey, EnvOpenAIBaseURL)
	}

	modelVar, defaultModel := EnvAnthropicModel, DefaultAnthropicModel
	if cfg.Kind == KindAnthropic {
		cfg.APIKey, cfg.BaseURL = env(EnvAnthropicKey), env(EnvAnthropicBaseURL)
	} else {
		cfg.APIKey, cfg.BaseURL = env(EnvOpenAIKey), env(EnvOpenAIBaseURL)
		modelVar, defaultModel = EnvOpenAIModel, DefaultOpenAIModel
		if !officialOpenAI(cfg.BaseURL) {
			defaultModel = ""
		}
	}
	if cfg.APIKey == "" && cfg.BaseURL == "" {
		return Config{}, fmt.Errorf("%w for %s", ErrNoKey, cfg.Kind)
	}
	cfg.Model = env(EnvModel)
	if cfg.Model == "" {
		cfg.Model = env(modelVar)
	}
	if cfg.Model == "" {
		cfg.Model = defaultModel
	}
	if cfg.Model == "" {
		return Config{}, fmt.Errorf("provider: no model for %s at %s; set %s or %s", cfg.Kind, cfg.BaseURL, EnvModel, modelVar)
	}
	cfg.CompactionModel = env(EnvCompactionModel)
	if _, err := cfg.withDefaults(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
