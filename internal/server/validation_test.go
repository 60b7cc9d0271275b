package server

import (
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server configured with a NaN threshold (TOML can write nan) used to
// answer /v1/check with 200 and an empty body. The engine's validation
// refuses it at New, naming the field.
func TestNaNThresholdIsRefusedAtStart(t *testing.T) {
	for _, edit := range []func(*host.Config){
		func(c *host.Config) { c.CompactThreshold = math.NaN() },
		func(c *host.Config) { c.PruneThreshold = math.NaN() },
		func(c *host.Config) { c.OverheadReserve = math.NaN() },
		func(c *host.Config) { c.OverheadReserve = 2 },
		func(c *host.Config) { c.EmergencyThreshold = math.Inf(1) },
	} {
		cfg := testConfig
		edit(&cfg)
		_, err := New(Options{Config: cfg, Registry: registry})
		var ce *host.ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, []string{"CompactThreshold", "PruneThreshold", "OverheadReserve", "EmergencyThreshold"}, ce.Field)
	}
	_, err := New(Options{Config: testConfig, Registry: registry, BodyTimeout: -1})
	assert.ErrorContains(t, err, "BodyTimeout")
}

// Even when a value slips through to an answer, JSON cannot hold it: the
// answer is a 500 that says so, never a 200 with an empty body.
func TestAnswerThatCannotBeEncodedIs500(t *testing.T) {
	w := httptest.NewRecorder()
	writeJSON(w, http.StatusOK, map[string]float64{"usage": math.NaN()})
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Contains(t, w.Body.String(), `"code":"internal"`)
	assert.Contains(t, w.Body.String(), "could not be encoded")
}

// Request options the engine refuses are named by their JSON fields,
// never by Go fields.
func TestBadOptionsNameTheRequestFields(t *testing.T) {
	_, ts := start(t, func(o *Options) { o.Logger = slog.New(slog.DiscardHandler) })
	session := encode(t, "canonical", codingSession(13, 1, 50))
	for _, tc := range []struct {
		name    string
		options map[string]any
		want    string
	}{
		{"keep over the budget", map[string]any{"keep_recent_tokens": 999999}, "options.keep_recent_tokens 999999: must be below the input budget of 18000 tokens"},
		{"unknown model", map[string]any{"model": "no-such-model"}, `options.model "no-such-model": is not in the catalog; set options.context_window`},
		{"emergency under compact", map[string]any{"thresholds": map[string]any{"compact": 0.9, "overhead_reserve": 0.01, "emergency": 0.5}},
			"options.thresholds.emergency 0.5: must be above the compaction point 0.89 (options.thresholds.compact less options.thresholds.overhead_reserve)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/check", "/v1/compact"} {
				r := call(t, ts, "POST", path, map[string]any{"session": session, "options": tc.options})
				e := r.err(t)
				assert.Equal(t, http.StatusBadRequest, r.Status)
				assert.Equal(t, CodeBadOptions, e.Code)
				assert.Equal(t, tc.want, e.Message)
			}
		})
	}
}

// The API's errors speak of JSON fields, never of CLI flags, and a
// mistyped field or value gets the names it was probably meant as.
func TestErrorsNameFieldsWithDidYouMean(t *testing.T) {
	_, ts := start(t, func(o *Options) { o.Logger = slog.New(slog.DiscardHandler) })
	session := encode(t, "canonical", codingSession(13, 1, 50))
	for _, tc := range []struct {
		name, path string
		body       any
		code, want string
	}{
		{"unknown option", "/v1/compact", map[string]any{"session": session, "options": map[string]any{"contxt_window": 16000}},
			CodeUnknownField, `unknown field "contxt_window"; did you mean context_window? (the fields are in the API reference, GET /openapi.json)`},
		{"unknown top-level field", "/v1/check", map[string]any{"session": session, "aply": true}, CodeUnknownField, `unknown field "aply"; did you mean apply?`},
		{"unknown format", "/v1/compact", map[string]any{"session": session, "format": "antropic"}, CodeUnknownFormat,
			`format "antropic": want one of canonical, anthropic, openai, claude-code, codex, copilot, mini-swe-agent, swe-agent, or omit it to detect the format; did you mean anthropic?`},
		{"unknown output format", "/v1/compact", map[string]any{"session": session, "output_format": "opnai"}, CodeUnknownFormat,
			`output_format "opnai": want one of canonical, anthropic, openai; did you mean openai?`},
		{"unknown strategy", "/v1/compact", map[string]any{"session": session, "options": map[string]any{"strategy": "structurd"}}, CodeUnknownStrategy,
			`options.strategy "structurd": no plugin provides it; the strategies are narrative, structured, truncate; did you mean structured?`},
		{"unknown category", "/v1/truncate", map[string]any{"content": "x", "category": "match-lsit"}, CodeUnknownCategory,
			`category "match-lsit": no truncator handles it; the categories are file-content, generic, head-tail, match-list; did you mean match-list?`},
		{"format mismatch", "/v1/compact", map[string]any{"session": `{"messages":[{"role":"user","content":"hi"}]}`, "format": "claude-code"}, CodeUnknownFormat,
			`set "format"`},
		{"token count past the limit", "/v1/compact", map[string]any{"session": session, "options": map[string]any{"context_window": "33m"}}, CodeBadRequest,
			`options.context_window: want a token count such as 16000, 16_000, 16k or 1.5m (a number or a string), from 0 to 32000000; got JSON string "33m"`},
		{"negative count", "/v1/truncate", map[string]any{"content": "x", "max_tokens": -1}, CodeBadRequest, `max_tokens: want a token count`},
		{"count of the gate", "/v1/check", map[string]any{"session": session, "request": map[string]any{"tool_schema_tokens": 40_000_000}}, CodeBadRequest,
			`request.tool_schema_tokens: want a token count`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := call(t, ts, "POST", tc.path, tc.body).wantError(t, http.StatusBadRequest, tc.code)
			assert.Contains(t, e.Message, tc.want)
			assert.NotContains(t, e.Message, "--", "an HTTP client has no flags")
		})
	}
}

// Token counts take the CLI's syntax in a request too, with its limit.
func TestTokenCountsTakeTheCLISyntax(t *testing.T) {
	_, ts := start(t, nil)
	session := encode(t, "canonical", codingSession(13, 1, 50))
	for _, window := range []any{"16k", "16_000", 16000, "0.016m"} {
		var c CheckResponse
		call(t, ts, "POST", "/v1/check", map[string]any{"session": session, "options": map[string]any{"context_window": window},
			"request": map[string]any{"tool_schema_tokens": "1k"}}).decode(t, &c)
		assert.Equal(t, 16000, c.Budget.ContextWindow, "%v", window)
		assert.Equal(t, 1000, c.Overhead, "%v", window)
	}
	var c CheckResponse
	call(t, ts, "POST", "/v1/check", map[string]any{"session": session, "options": map[string]any{"context_window": "32m"}}).decode(t, &c)
	assert.Equal(t, 32_000_000, c.Budget.ContextWindow, "the limit itself is accepted")
}

// The limits a client meets are named as the server's, not by the flags
// that set them: the client has none.
func TestLimitErrorsNameNoFlags(t *testing.T) {
	_, ts := start(t, func(o *Options) { o.MaxRequestBytes = 1 << 10; o.Logger = slog.New(slog.DiscardHandler) })
	e := call(t, ts, "POST", "/v1/truncate", map[string]any{"content": strings.Repeat("x", 4<<10)}).wantError(t, http.StatusRequestEntityTooLarge, CodeTooLarge)
	assert.Contains(t, e.Message, "the body is over the server's limit of 1024 bytes")
	assert.NotContains(t, e.Message, "--")
}
