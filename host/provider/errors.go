package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/overflow"
	"github.com/compact-host/compact-host/internal/redact"
)

var (
	// ErrNoKey is returned by New and FromEnv when no API key is configured
	// and no BaseURL points at a server that needs none. Callers treat it
	// as "no model": strategies run their offline mode.
	ErrNoKey = errors.New("provider: no API key configured")

	// ErrEmptyCompletion is matched (errors.Is) by the *EmptyCompletionError
	// returned when a call succeeded but the model produced no text.
	ErrEmptyCompletion = errors.New("provider: empty completion")

	// ErrTimeout is matched (errors.Is) by the *TimeoutError returned when
	// one attempt got no complete response within Config.Timeout.
	ErrTimeout = errors.New("provider: timed out")
)

// maxErrorBody caps how much of an error response is kept.
const maxErrorBody = 1 << 20

// maxResponseBody caps a completion's response: a summary is a few
// thousand tokens, so anything near this is not one.
const maxResponseBody = 32 << 20

// Error is a failed model call that got an HTTP response: it carries the
// status, the provider's error code and type, and the raw body, whatever
// its shape (OpenAI's {"error":{...}}, vLLM's {"object":"error",...},
// Ollama's {"error":"..."}). overflow.FromError understands it through
// overflow.HTTPError.
//
// The API key never appears in an Error: if a server echoes it, it is
// replaced by "[redacted]" in Message and Body.
type Error struct {
	Provider   string // "anthropic" or "openai"
	StatusCode int
	Code       string // the provider's error code, e.g. "context_length_exceeded"
	Type       string // the provider's error type, e.g. "invalid_request_error"
	Message    string
	Body       []byte
	// RetryAfter is what the response's Retry-After (or retry-after-ms)
	// header asked for; 0 when absent.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "provider %s: HTTP %d", e.Provider, e.StatusCode)
	if e.Type != "" || e.Code != "" {
		b.WriteString(" (")
		b.WriteString(strings.Trim(e.Type+" "+e.Code, " "))
		b.WriteString(")")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// HTTPStatus implements overflow.HTTPError.
func (e *Error) HTTPStatus() int { return e.StatusCode }

// HTTPBody implements overflow.HTTPError.
func (e *Error) HTTPBody() []byte { return e.Body }

// Overflow reports whether the error is a context overflow.
func (e *Error) Overflow() bool { return overflow.Classify(e.StatusCode, e.Body).Overflow }

// EmptyCompletionError is a call that succeeded without any text. It keeps
// the usage, which the provider billed all the same.
type EmptyCompletionError struct {
	Provider string
	Model    string
	// StopReason is the provider's stop or finish reason ("max_tokens",
	// "length", "refusal", ...), when it gave one.
	StopReason string
	Usage      abi.Usage
}

func (e *EmptyCompletionError) Error() string {
	return fmt.Sprintf("provider %s: model %s returned no text (stop reason %q)", e.Provider, e.Model, e.StopReason)
}

// Is makes errors.Is(err, ErrEmptyCompletion) hold.
func (e *EmptyCompletionError) Is(target error) bool { return target == ErrEmptyCompletion }

// TimeoutError is an attempt that got no complete response within the
// configured per-attempt timeout: the server stalled before or while
// sending its response. The caller's own context ending is reported as
// the context's error instead.
type TimeoutError struct {
	Provider string
	Timeout  time.Duration
	// Attempts is how many attempts were made, all of which timed out or
	// failed in a way that was retried.
	Attempts int
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("provider %s: no complete response within %s (attempt %d)", e.Provider, e.Timeout, e.Attempts)
}

// Is makes errors.Is(err, ErrTimeout) and errors.Is(err,
// context.DeadlineExceeded) hold.
func (e *TimeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

// exchange records the HTTP response of one attempt.
type exchange struct {
	status int
	header http.Header
	body   []byte // error responses only
}

// newError builds an *Error from the recorded response.
func newError(provider string, ex *exchange, key string) *Error {
	// The key, and anything shaped like one (a server may quote back
	// another header), never reaches an Error.
	body := redact.Bytes(ex.body, key)
	code, typ, msg := errorFields(body)
	if msg == "" {
		msg = strings.TrimSpace(string(body))
		if len(msg) > 512 {
			msg = msg[:512] + "..."
		}
	}
	return &Error{
		Provider:   provider,
		StatusCode: ex.status,
		Code:       code,
		Type:       typ,
		Message:    msg,
		Body:       body,
		RetryAfter: retryAfter(ex.header, time.Now()),
	}
}

// errorFields reads the code, type and message of the usual error shapes:
// {"error":{...}} (OpenAI and most compatible servers), {"type":"error",
// "error":{...}} (Anthropic), {"error":"..."} (Ollama) and top-level
// {"message":...,"type":...,"code":...} (vLLM, Mistral).
func errorFields(body []byte) (code, typ, msg string) {
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(body, &env) != nil {
		return "", "", ""
	}
	code, typ, msg = scalar(env.Code), scalar(env.Type), env.Message
	inner := bytes.TrimSpace(env.Error)
	switch {
	case len(inner) > 0 && inner[0] == '{':
		var e struct {
			Message string          `json:"message"`
			Type    json.RawMessage `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(inner, &e) == nil {
			code, typ, msg = scalar(e.Code), scalar(e.Type), e.Message
		}
	case len(inner) > 0 && inner[0] == '"':
		var s string
		if json.Unmarshal(inner, &s) == nil {
			msg = s
		}
	}
	if typ == "error" { // Anthropic's envelope type, not the error's
		typ = ""
	}
	return code, typ, msg
}

// scalar renders a JSON string or number; codes are either.
func scalar(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// retryAfter reads retry-after-ms (OpenAI) or Retry-After in seconds or as
// an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// redactedError hides the API key in the text of an error the HTTP
// client produced, keeping the chain for errors.Is and errors.As.
type redactedError struct {
	err error
	key string
}

func (e *redactedError) Error() string { return redact.String(e.err.Error(), e.key) }
func (e *redactedError) Unwrap() error { return e.err }

func redactErr(err error, key string) error {
	if err == nil {
		return nil
	}
	if s := err.Error(); redact.String(s, key) == s {
		return err
	}
	return &redactedError{err: err, key: key}
}

var _ overflow.HTTPError = (*Error)(nil)
