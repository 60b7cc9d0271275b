package server

import (
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
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
