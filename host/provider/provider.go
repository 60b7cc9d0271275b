package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/compact-host/compact-host/abi"
)

// Provider kinds.
const (
	KindAnthropic = "anthropic"
	KindOpenAI    = "openai"
	// KindResponses is OpenAI's Responses API (POST {BaseURL}/responses,
	// streamed), for a client whose conversation speaks it; its BaseURL
	// and key are KindOpenAI's.
	KindResponses = "responses"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxTokens      = 4096
	DefaultTimeout        = 2 * time.Minute
	DefaultMaxRetries     = 2
	DefaultRetryBaseDelay = 500 * time.Millisecond
	DefaultRetryMaxDelay  = 30 * time.Second
)

// ErrInvalidRequest is returned (wrapped) for a request that cannot be
// sent: nil, or without any message that has content.
var ErrInvalidRequest = errors.New("provider: invalid request")

// Client completes a prompt with one model. Implementations are safe for
// concurrent use.
type Client interface {
	// Complete sends req and returns the model's text and the usage the
	// provider reported. On failure the error is an *Error, a
	// *TimeoutError, an *EmptyCompletionError (errors.Is
	// ErrEmptyCompletion) or the error of ctx.
	Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error)
	// Model is the model Complete asks for: Config.CompactionModel when
	// set, otherwise Config.Model.
	Model() string
}

// Config configures a Client. The zero value of every field but Kind,
// Model and (for hosted APIs) APIKey means the default.
type Config struct {
	// Kind is KindAnthropic, KindOpenAI or KindResponses. OpenAI-compatible servers
	// (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter) are KindOpenAI with
	// a BaseURL.
	Kind string
	// BaseURL overrides the API's address. For KindOpenAI it includes the
	// version path, as the servers document it: "http://localhost:11434/v1"
	// for Ollama, "http://localhost:8000/v1" for vLLM. Empty means the
	// provider's public API.
	BaseURL string
	// APIKey is sent as x-api-key (Anthropic) or as a Bearer token
	// (OpenAI). It may be empty, or a placeholder, when BaseURL points at
	// a server that needs no key.
	APIKey string
	// Model is the model the agent runs on.
	Model string
	// CompactionModel, when set, is the model summaries are asked of,
	// typically a cheaper one than Model.
	CompactionModel string
	// MaxTokens is the output limit of a request that sets none.
	// Default DefaultMaxTokens.
	MaxTokens int
	// Timeout bounds each attempt, from sending the request to reading
	// the whole response. Default DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is how many times a failed attempt is retried (so a call
	// makes at most MaxRetries+1 attempts). Zero means DefaultMaxRetries;
	// a negative value means no retries.
	MaxRetries int
	// RetryBaseDelay is the backoff before the first retry; each further
	// retry doubles it, up to RetryMaxDelay. Default DefaultRetryBaseDelay.
	RetryBaseDelay time.Duration
	// RetryMaxDelay caps the backoff. A server that asks (Retry-After) for
	// a longer wait is not retried: its error, with RetryAfter set, is
	// returned at once. Default DefaultRetryMaxDelay.
	RetryMaxDelay time.Duration
	// HTTPClient sends the requests. Default: a new http.Client with no
	// timeout of its own (Timeout and the caller's context bound calls).
	HTTPClient *http.Client
	// OnRetry, when set, is called before each retry's wait, so a caller
	// can show that a call is being retried and why.
	OnRetry func(Retry)
}

// Retry describes a retry about to happen.
type Retry struct {
	// Attempt is the number of the attempt that failed (1 for the first);
	// MaxAttempts is MaxRetries+1.
	Attempt, MaxAttempts int
	Err                  error
	Wait                 time.Duration
}

// ConfigError is a Config setting that cannot work. Field names the
// Config field, so a caller that took it from a flag or a file key can
// name that instead.
type ConfigError struct {
	Field  string
	Value  string
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("provider: Config.%s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("provider: Config.%s %s: %s", e.Field, e.Value, e.Reason)
}

// model is the model a client built from c asks for.
func (c Config) model() string {
	if c.CompactionModel != "" {
		return c.CompactionModel
	}
	return c.Model
}

// withDefaults fills in zero values and validates c.
func (c Config) withDefaults() (Config, error) {
	switch c.Kind {
	case KindAnthropic, KindOpenAI, KindResponses:
	case "":
		return c, &ConfigError{Field: "Kind", Reason: "empty; want \"anthropic\", \"openai\" or \"responses\""}
	default:
		return c, &ConfigError{Field: "Kind", Value: fmt.Sprintf("%q", c.Kind), Reason: "want \"anthropic\", \"openai\" or \"responses\""}
	}
	if c.APIKey == "" && c.BaseURL == "" {
		return c, fmt.Errorf("%w for %s (set the API key, or a BaseURL for a server that needs none)", ErrNoKey, c.Kind)
	}
	if c.model() == "" {
		return c, &ConfigError{Field: "CompactionModel", Reason: fmt.Sprintf("empty, and Model too: %s needs a model to ask for summaries", c.Kind)}
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return c, &ConfigError{Field: "BaseURL", Value: fmt.Sprintf("%q", c.BaseURL), Reason: "not an absolute URL like http://localhost:11434/v1"}
		}
	}
	if c.Timeout < 0 {
		return c, &ConfigError{Field: "Timeout", Value: c.Timeout.String(), Reason: "want a positive duration, or 0 for the default"}
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = DefaultMaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	if c.RetryBaseDelay <= 0 {
		c.RetryBaseDelay = DefaultRetryBaseDelay
	}
	if c.RetryMaxDelay <= 0 {
		c.RetryMaxDelay = DefaultRetryMaxDelay
	}
	if c.RetryMaxDelay < c.RetryBaseDelay {
		c.RetryMaxDelay = c.RetryBaseDelay
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	return c, nil
}

// New returns a Client for cfg. It returns an error wrapping ErrNoKey when
// cfg has neither an APIKey nor a BaseURL.
func New(cfg Config) (Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &client{cfg: cfg, model: cfg.model()}
	switch cfg.Kind {
	case KindAnthropic:
		c.backend = newAnthropic(cfg)
	case KindOpenAI:
		c.backend = newOpenAI(cfg)
	case KindResponses:
		c.backend = newResponses(cfg)
	}
	return c, nil
}

// backend is one provider's wire format.
type backend interface {
	send(ctx context.Context, model string, p prompt, maxTokens int, ex *exchange) (*abi.CompleteResponse, error)
}

type client struct {
	cfg     Config
	model   string
	backend backend
}

func (c *client) Model() string { return c.model }

func (c *client) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	p := render(req)
	if len(p.turns) == 0 {
		return nil, fmt.Errorf("%w: no message with content", ErrInvalidRequest)
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = c.cfg.MaxTokens
	}
	return c.retry(ctx, func(ctx context.Context, ex *exchange) (*abi.CompleteResponse, error) {
		return c.backend.send(ctx, c.model, p, maxTokens, ex)
	})
}

// officialOpenAI reports whether base is OpenAI's own API.
func officialOpenAI(base string) bool {
	if base == "" {
		return true
	}
	u, err := url.Parse(base)
	return err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}

var _ Client = (*client)(nil)
