package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
)

func TestCompactEachInputForm(t *testing.T) {
	_, ts := start(t, nil)
	msgs := codingSession(1, 8, 600) // about 11,000 tokens of results in a 18,000 budget
	for _, tc := range []struct {
		form      string // how the session is sent
		inFormat  string // the format the server should detect
		outFormat string // the default output format
	}{
		{formats.Anthropic, formats.Anthropic, formats.Anthropic},
		{formats.OpenAI, formats.OpenAI, formats.OpenAI},
		{"canonical", formats.Canonical, formats.Canonical},
		{"jsonl", formats.Canonical, formats.Canonical},
		{"log", formats.Canonical, formats.Canonical},
	} {
		t.Run(tc.form, func(t *testing.T) {
			var got CompactResponse
			call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, tc.form, msgs)}).decode(t, &got)
			rep := got.Report
			if rep.Action != "compacted" || rep.Format != tc.inFormat || rep.OutputFormat != tc.outFormat {
				t.Fatalf("action %q format %q output %q, want compacted %s %s", rep.Action, rep.Format, rep.OutputFormat, tc.inFormat, tc.outFormat)
			}
			if rep.TokensAfter >= rep.TokensBefore || rep.Folded == 0 || !rep.Fits {
				t.Fatalf("tokens %d → %d, folded %d, fits %v", rep.TokensBefore, rep.TokensAfter, rep.Folded, rep.Fits)
			}
			if rep.Strategy != "structured" || !rep.Offline {
				t.Errorf("strategy %q offline %v, want structured offline (no model configured)", rep.Strategy, rep.Offline)
			}
			ctx := contextOf(t, rep.OutputFormat, got.Session)
			if err := host.Validate(ctx, false); err != nil {
				t.Fatalf("returned session is invalid: %v", err)
			}
			if len(ctx) >= len(msgs) || len(ctx) != rep.Kept {
				t.Fatalf("returned context has %d messages (report: %d), the input %d", len(ctx), rep.Kept, len(msgs))
			}
			// The summary carries the latest request, and the newest turn
			// is kept verbatim.
			all := flatten(ctx)
			if !strings.Contains(all, "session 1 turn 7: fix the failing test") {
				t.Errorf("the latest request is lost:\n%.2000s", all)
			}
			if !strings.Contains(all, "Turn 7 is done") {
				t.Errorf("the newest reply is not kept")
			}
		})
	}
}

// flatten is the text of every block of msgs.
func flatten(msgs []abi.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, bl := range m.Content {
			b.WriteString(bl.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func TestCompactLogIsUndoableAndCompactsAgain(t *testing.T) {
	_, ts := start(t, nil)
	msgs := codingSession(2, 8, 600)
	var first CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, "log", msgs)}).decode(t, &first)
	s := replay(t, first.Session)
	if n := len(s.Compactions()); n != 1 {
		t.Fatalf("the returned log has %d compactions, want 1", n)
	}
	if _, err := s.Undo(); err != nil {
		t.Fatal(err)
	}
	if got := s.Context(); len(got) != len(msgs) || flatten(got) != flatten(msgs) {
		t.Fatalf("after undo the context has %d messages, want the %d sent", len(got), len(msgs))
	}

	// The log sent back with more turns compacts again, on top of the
	// first compaction, whose summary the new one merges.
	more := codingSession(3, 6, 600)
	var log string
	if err := json.Unmarshal(first.Session, &log); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(log)
	for i := range more[1:] {
		m := more[1+i]
		m.ID = "more" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		line, _ := json.Marshal(host.Entry{Type: host.EntryMessage, Message: &m})
		b.Write(line)
		b.WriteByte('\n')
	}
	second, _ := json.Marshal(b.String())
	var got CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: second}).decode(t, &got)
	if got.Report.Action != "compacted" {
		t.Fatalf("second compaction: %+v", got.Report)
	}
	s2 := replay(t, got.Session)
	if n := len(s2.Compactions()); n != 2 {
		t.Fatalf("after the second compaction the log has %d compactions, want 2", n)
	}
	if err := host.Validate(s2.Context(), false); err != nil {
		t.Fatal(err)
	}
}

func TestCompactUnderThresholdReturnsTheSessionUnchanged(t *testing.T) {
	_, ts := start(t, nil)
	msgs := codingSession(4, 2, 200)
	var got CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, formats.OpenAI, msgs),
		Options: CompactOptions{Threshold: 0.8}}).decode(t, &got)
	if got.Report.Action != "none" || got.Report.TokensAfter != got.Report.TokensBefore || !got.Report.Fits {
		t.Fatalf("report %+v, want action none", got.Report)
	}
	var sent bytes.Buffer
	json.Compact(&sent, encode(t, formats.OpenAI, msgs))
	if !bytes.Equal(got.Session, sent.Bytes()) {
		t.Fatalf("the session came back changed:\n%s", got.Session)
	}

	// Over the threshold, it compacts.
	big := codingSession(4, 8, 600)
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, formats.OpenAI, big),
		Options: CompactOptions{Threshold: 0.3}}).decode(t, &got)
	if got.Report.Action != "compacted" {
		t.Fatalf("over the threshold: action %q", got.Report.Action)
	}
}

func TestCompactDryRunPlansAndSendsNoSession(t *testing.T) {
	_, ts := start(t, nil)
	var got CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, "canonical", codingSession(5, 8, 600)),
		Options: CompactOptions{DryRun: true}}).decode(t, &got)
	p := got.Report.Plan
	if got.Report.Action != "plan" || p == nil || got.Session != nil {
		t.Fatalf("dry run: %+v, session %d bytes", got.Report, len(got.Session))
	}
	if p.Folded == 0 || p.TokensKept >= p.TokensBefore || len(p.FilesModified) == 0 || p.FirstKeptID == "" {
		t.Fatalf("plan %+v", p)
	}
}

func TestCompactNothingToFold(t *testing.T) {
	_, ts := start(t, nil)
	msgs := []abi.Message{text(abi.RoleUser, "hello"), text(abi.RoleAssistant, "hi")}
	var got CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, "canonical", msgs)}).decode(t, &got)
	if got.Report.Action != "nothing to fold" || !got.Report.Fits {
		t.Fatalf("report %+v", got.Report)
	}
	if ctx := contextOf(t, formats.Canonical, got.Session); flatten(ctx) != flatten(msgs) {
		t.Fatalf("the session changed: %+v", ctx)
	}
}

func TestCompactOptionsOverrideTheEngine(t *testing.T) {
	_, ts := start(t, nil)
	session := encode(t, formats.Anthropic, codingSession(6, 8, 600))

	var got CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session, Options: CompactOptions{
		EngineOptions: EngineOptions{Strategy: "truncate"}, Focus: "the nil check in the handler"}}).decode(t, &got)
	if got.Report.Strategy != "truncate" {
		t.Errorf("strategy %q, want truncate", got.Report.Strategy)
	}

	// A model sizes the budget; the server's tokenizer setting stays.
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session, Options: CompactOptions{
		EngineOptions: EngineOptions{Model: "gpt-4o"}, DryRun: true}}).decode(t, &got)
	if got.Report.ContextWindow != 128000 || got.Report.Tokenizer != "chars/4" || got.Report.Model != "gpt-4o" {
		t.Errorf("gpt-4o: window %d tokenizer %q model %q", got.Report.ContextWindow, got.Report.Tokenizer, got.Report.Model)
	}
	// With the tokenizer on auto, the model picks it.
	_, auto := start(t, func(o *Options) { o.Config.Tokenizer = "" })
	call(t, auto, "POST", "/v1/compact", CompactRequest{Session: session, Options: CompactOptions{
		EngineOptions: EngineOptions{Model: "gpt-4o"}, DryRun: true}}).decode(t, &got)
	if got.Report.Tokenizer != "o200k" {
		t.Errorf("gpt-4o on auto: tokenizer %q, want o200k", got.Report.Tokenizer)
	}

	// A smaller window and keep figure fold more.
	var small CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session, Options: CompactOptions{
		EngineOptions: EngineOptions{ContextWindow: 16000, KeepRecentTokens: 1000}, DryRun: true}}).decode(t, &small)
	var def CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session, Options: CompactOptions{DryRun: true}}).decode(t, &def)
	if small.Report.ContextWindow != 16000 || small.Report.Plan.Kept >= def.Report.Plan.Kept {
		t.Errorf("keep_recent_tokens 1000 kept %d messages, the default %d", small.Report.Plan.Kept, def.Report.Plan.Kept)
	}

	for _, tc := range []struct {
		name   string
		opts   string
		status int
		code   string
	}{
		{"unknown strategy", `{"strategy":"nope"}`, 400, CodeUnknownStrategy},
		{"model not in the catalog", `{"model":"my-private-model"}`, 400, CodeBadOptions},
		{"keep over the budget", `{"keep_recent_tokens":50000}`, 400, CodeBadOptions},
		{"negative window", `{"context_window":-5}`, 400, CodeBadRequest},
		{"huge window", `{"context_window":1000000000}`, 400, CodeBadRequest},
		{"threshold over 1", `{"threshold":1.5}`, 400, CodeBadRequest},
		{"thresholds out of order", `{"thresholds":{"compact":0.9,"overhead_reserve":0.01,"emergency":0.5}}`, 400, CodeBadOptions},
		{"threshold share out of range", `{"thresholds":{"prune":2}}`, 400, CodeBadRequest},
		{"focus too long", `{"focus":"` + strings.Repeat("x", maxFocusBytes+1) + `"}`, 400, CodeBadRequest},
		{"unknown option", `{"temperature":0.5}`, 400, CodeUnknownField},
		{"wrong type", `{"context_window":"big"}`, 400, CodeBadRequest},
		{"wrong type in thresholds", `{"thresholds":{"prune":"high"}}`, 400, CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"session":` + string(session) + `,"options":` + tc.opts + `}`
			r := call(t, ts, "POST", "/v1/compact", body)
			if e := r.err(t); r.Status != tc.status || e.Code != tc.code {
				t.Fatalf("status %d code %q (%s), want %d %s", r.Status, e.Code, e.Message, tc.status, tc.code)
			}
		})
	}
}

func TestCompactOutputFormats(t *testing.T) {
	_, ts := start(t, nil)
	msgs := codingSession(7, 8, 600)
	for _, out := range []string{formats.Canonical, formats.Anthropic, formats.OpenAI} {
		var got CompactResponse
		call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, "jsonl", msgs), OutputFormat: out}).decode(t, &got)
		if got.Report.OutputFormat != out {
			t.Fatalf("output_format %q, want %q", got.Report.OutputFormat, out)
		}
		if out != formats.Canonical && (len(got.Session) == 0 || got.Session[0] != '{') {
			t.Fatalf("%s output is not a JSON object: %.80s", out, got.Session)
		}
		if err := host.Validate(contextOf(t, out, got.Session), false); err != nil {
			t.Fatalf("%s output: %v", out, err)
		}
	}
	r := call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, "jsonl", msgs), OutputFormat: formats.ClaudeCode})
	if e := r.err(t); r.Status != 400 || e.Code != CodeUnknownFormat {
		t.Fatalf("claude-code output: %d %+v", r.Status, e)
	}
}

// TestCompactCorpusSession sends a real Claude Code session file as the
// agent left it.
func TestCompactCorpusSession(t *testing.T) {
	path := filepath.Join(repoRoot(t), "..", "shared", "corpus", "claude-code-go-cli.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("corpus absent: %v", err)
	}
	_, ts := start(t, nil)
	session, _ := json.Marshal(string(data))
	var got CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session, OutputFormat: formats.Anthropic}).decode(t, &got)
	rep := got.Report
	if rep.Format != formats.ClaudeCode || rep.Action != "compacted" || rep.TokensAfter >= rep.TokensBefore || !rep.Fits {
		t.Fatalf("report %+v", rep)
	}
	ctx := contextOf(t, formats.Anthropic, got.Session)
	if err := host.Validate(ctx, false); err != nil {
		t.Fatal(err)
	}
	if len(rep.SkippedRecords) == 0 {
		t.Errorf("a Claude Code file has records without conversation; none reported skipped")
	}
}

func TestCompactCannotSendAnInvalidSession(t *testing.T) {
	// A session log whose tool result answers no call: the engine would
	// keep it, and providers would reject it.
	_, ts := start(t, nil)
	lines := []string{
		`{"type":"message","message":{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}]}}`,
		`{"type":"message","message":{"id":"m2","role":"user","content":[{"type":"tool_result","tool_use_id":"nope","text":"x"}]}}`,
	}
	session, _ := json.Marshal(strings.Join(lines, "\n"))
	r := call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session})
	if e := r.err(t); r.Status != http.StatusBadRequest || e.Code != CodeInvalidSession || !strings.Contains(e.Message, "nope") {
		t.Fatalf("%d %+v", r.Status, e)
	}
}
