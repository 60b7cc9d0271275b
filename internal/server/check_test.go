package server

import (
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/internal/tokencount"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckMeasures(t *testing.T) {
	_, ts := start(t, nil)
	small := encode(t, formats.Anthropic, codingSession(10, 2, 200))
	var got CheckResponse
	call(t, ts, "POST", "/v1/check", CheckRequest{Session: small}).decode(t, &got)
	assert.Equal(t, "none", got.Action)
	assert.True(t, got.Fits)
	assert.Nil(t, got.Decision)
	assert.Nil(t, got.Session)
	assert.Equal(t, Budget{ContextWindow: 20000, MaxOutputTokens: 2000, Input: 18000, PruneAt: 0.70, CompactAt: got.Budget.CompactAt, EmergencyAt: 0.95}, got.Budget)
	require.Positive(t, got.Tokens)
	assert.Equal(t, got.Tokens, got.Total)
	assert.Equal(t, float64(got.Total)/18000, got.Usage)

	// The request's tool schemas and dynamic context count against the
	// budget and move the gate's decision.
	for _, tc := range []struct {
		overhead int
		action   string
		fits     bool
	}{
		{0, "none", true},
		{int(0.72*18000) - got.Tokens, "prune", true},
		{int(0.80*18000) - got.Tokens, "compact", true},
		{int(0.96*18000) - got.Tokens, "emergency", true},
		{19000 - got.Tokens, "emergency", false},
	} {
		var c CheckResponse
		call(t, ts, "POST", "/v1/check", CheckRequest{Session: small,
			Request: GateRequest{ToolSchemaTokens: tokencount.Tokens(tc.overhead / 2), DynamicTokens: tokencount.Tokens(tc.overhead - tc.overhead/2)}}).decode(t, &c)
		assert.Equal(t, tc.overhead, c.Overhead)
		assert.Equal(t, got.Tokens+tc.overhead, c.Total, "overhead %d", tc.overhead)
		assert.Equal(t, tc.action, c.Action, "overhead %d", tc.overhead)
		assert.Equal(t, tc.fits, c.Fits, "overhead %d", tc.overhead)
	}
}

func TestCheckApplyRunsTheGate(t *testing.T) {
	_, ts := start(t, nil)
	msgs := codingSession(11, 12, 600) // over the 18,000 budget
	var got CheckResponse
	call(t, ts, "POST", "/v1/check", CheckRequest{Session: encode(t, "jsonl", msgs), Apply: true,
		Request: GateRequest{ToolSchemaTokens: 500}}).decode(t, &got)
	d := got.Decision
	require.NotNil(t, d)
	assert.NotEqual(t, "none", d.Action)
	assert.Less(t, d.TokensAfter, d.TokensBefore)
	assert.True(t, d.Fits)
	assert.True(t, got.Fits)
	assert.Equal(t, got.Total, d.TokensBefore, "the decision and the check measure alike")
	assert.Equal(t, formats.Canonical, got.OutputFormat)
	require.NotNil(t, got.ModelStats, "apply reports the model calls")
	assert.Zero(t, got.ModelStats.Calls, "offline: no model calls")
	ctx := contextOf(t, got.OutputFormat, got.Session)
	require.NoError(t, host.Validate(ctx, false))
	assert.Less(t, len(ctx), len(msgs), "the gate folded messages")

	// Under the prune threshold, apply changes nothing.
	var calm CheckResponse
	call(t, ts, "POST", "/v1/check", CheckRequest{Session: encode(t, formats.OpenAI, codingSession(12, 2, 200)), Apply: true}).decode(t, &calm)
	require.NotNil(t, calm.Decision)
	assert.Equal(t, "none", calm.Decision.Action)
	assert.Equal(t, formats.OpenAI, calm.OutputFormat)
	assert.Len(t, contextOf(t, formats.OpenAI, calm.Session), len(codingSession(12, 2, 200)))
}

func TestCheckRejects(t *testing.T) {
	_, ts := start(t, nil)
	session := string(encode(t, "canonical", codingSession(13, 1, 50)))
	for _, tc := range []struct {
		name, body, code string
	}{
		{"negative overhead", `{"session":` + session + `,"request":{"tool_schema_tokens":-1}}`, CodeBadRequest},
		{"focus is a compact option", `{"session":` + session + `,"options":{"focus":"x"}}`, CodeUnknownField},
		{"unknown request field", `{"session":` + session + `,"request":{"schemas":3}}`, CodeUnknownField},
		{"no session", `{"apply":true}`, CodeBadRequest},
		{"session of the wrong type", `{"session":42}`, CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, ts, "POST", "/v1/check", tc.body)
			e := r.err(t)
			assert.Equal(t, 400, r.Status)
			assert.Equal(t, tc.code, e.Code, e.Message)
		})
	}
	r := call(t, ts, "POST", "/v1/check", `{"session":{"model":"x"}}`)
	e := r.err(t)
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, CodeUnknownFormat, e.Code)
	assert.Contains(t, e.Message, "format")
}

// options.thresholds.min_savings reaches the gate: a compaction that
// could not free that share of the request is not started.
func TestCheckApplyMinSavings(t *testing.T) {
	_, ts := start(t, nil)
	session := encode(t, "jsonl", codingSession(14, 8, 600))
	var probe CheckResponse
	call(t, ts, "POST", "/v1/check", CheckRequest{Session: session}).decode(t, &probe)
	used := float64(probe.Total) / float64(probe.Budget.Input)
	require.Greater(t, used, 0.3, "the session must be over a compaction point of 0.25")
	require.Less(t, used, 0.9, "and under the emergency point of 0.95")

	apply := func(minSavings float64) *Decision {
		var got CheckResponse
		call(t, ts, "POST", "/v1/check", CheckRequest{Session: session, Apply: true, Options: EngineOptions{
			Thresholds: &Thresholds{Prune: 0.2, Compact: 0.3, OverheadReserve: 0.05, Emergency: 0.95, MinSavings: minSavings}}}).decode(t, &got)
		require.NotNil(t, got.Decision)
		return got.Decision
	}
	assert.Equal(t, "compacted", apply(0).Action, "the server's min_savings lets the compaction run")
	d := apply(0.99)
	assert.NotEqual(t, "compacted", d.Action, "no compaction can free 99%% of the request")
	assert.NotEqual(t, "emergency", d.Action)

	r := call(t, ts, "POST", "/v1/check", CheckRequest{Session: session, Apply: true, Options: EngineOptions{
		Thresholds: &Thresholds{MinSavings: 2}}})
	assert.Equal(t, 400, r.Status)
	assert.Contains(t, r.err(t).Message, "options.thresholds.min_savings 2")
}
