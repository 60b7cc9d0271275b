package server

import (
	"strings"
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
)

func TestCheckMeasures(t *testing.T) {
	_, ts := start(t, nil)
	small := encode(t, formats.Anthropic, codingSession(10, 2, 200))
	var got CheckResponse
	call(t, ts, "POST", "/v1/check", CheckRequest{Session: small}).decode(t, &got)
	if got.Action != "none" || !got.Fits || got.Decision != nil || got.Session != nil {
		t.Fatalf("small session: %+v", got)
	}
	b := got.Budget
	if b.ContextWindow != 20000 || b.MaxOutputTokens != 2000 || b.Input != 18000 || b.PruneAt != 0.70 || b.EmergencyAt != 0.95 {
		t.Fatalf("budget %+v", b)
	}
	if got.Tokens <= 0 || got.Total != got.Tokens || got.Usage != float64(got.Total)/18000 {
		t.Fatalf("tokens %d total %d usage %g", got.Tokens, got.Total, got.Usage)
	}

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
			Request: GateRequest{ToolSchemaTokens: tc.overhead / 2, DynamicTokens: tc.overhead - tc.overhead/2}}).decode(t, &c)
		if c.Overhead != tc.overhead || c.Total != got.Tokens+tc.overhead || c.Action != tc.action || c.Fits != tc.fits {
			t.Errorf("overhead %d: total %d action %q fits %v, want %q %v", tc.overhead, c.Total, c.Action, c.Fits, tc.action, tc.fits)
		}
	}
}

func TestCheckApplyRunsTheGate(t *testing.T) {
	_, ts := start(t, nil)
	msgs := codingSession(11, 12, 600) // over the 18,000 budget
	var got CheckResponse
	call(t, ts, "POST", "/v1/check", CheckRequest{Session: encode(t, "jsonl", msgs), Apply: true,
		Request: GateRequest{ToolSchemaTokens: 500}}).decode(t, &got)
	d := got.Decision
	if d == nil || d.Action == "none" || d.TokensAfter >= d.TokensBefore || !d.Fits || !got.Fits {
		t.Fatalf("decision %+v", d)
	}
	if d.TokensBefore != got.Total {
		t.Errorf("the decision measured %d tokens before, the check %d", d.TokensBefore, got.Total)
	}
	if got.OutputFormat != formats.Canonical {
		t.Errorf("output format %q", got.OutputFormat)
	}
	ctx := contextOf(t, got.OutputFormat, got.Session)
	if err := host.Validate(ctx, false); err != nil {
		t.Fatal(err)
	}
	if len(ctx) >= len(msgs) {
		t.Fatalf("the gate left %d of %d messages", len(ctx), len(msgs))
	}

	// Under the prune threshold, apply changes nothing.
	var calm CheckResponse
	call(t, ts, "POST", "/v1/check", CheckRequest{Session: encode(t, formats.OpenAI, codingSession(12, 2, 200)), Apply: true}).decode(t, &calm)
	if calm.Decision.Action != "none" || calm.OutputFormat != formats.OpenAI {
		t.Fatalf("calm: %+v", calm.Decision)
	}
	if n := len(contextOf(t, formats.OpenAI, calm.Session)); n != len(codingSession(12, 2, 200)) {
		t.Fatalf("calm session came back with %d messages", n)
	}
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
			if e := r.err(t); r.Status != 400 || e.Code != tc.code {
				t.Fatalf("%d %+v, want 400 %s", r.Status, e, tc.code)
			}
		})
	}
	r := call(t, ts, "POST", "/v1/check", `{"session":{"model":"x"}}`)
	if e := r.err(t); r.Status != 400 || e.Code != CodeUnknownFormat || !strings.Contains(e.Message, "format") {
		t.Fatalf("undetectable session: %d %+v", r.Status, e)
	}
}
