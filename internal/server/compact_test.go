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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			require.Equal(t, "compacted", rep.Action)
			assert.Equal(t, tc.inFormat, rep.Format)
			assert.Equal(t, tc.outFormat, rep.OutputFormat)
			assert.Less(t, rep.TokensAfter, rep.TokensBefore)
			assert.Positive(t, rep.Folded)
			assert.True(t, rep.Fits)
			assert.Equal(t, "structured", rep.Strategy)
			assert.Equal(t, "structured", rep.RequestedStrategy)
			assert.Empty(t, rep.Fallbacks)
			assert.True(t, rep.Offline, "no model configured")
			assert.Zero(t, rep.Calls)
			ctx := contextOf(t, rep.OutputFormat, got.Session)
			require.NoError(t, host.Validate(ctx, false), "the returned session is valid")
			assert.Less(t, len(ctx), len(msgs))
			assert.Len(t, ctx, rep.Kept)
			// The summary carries the latest request, and the newest turn
			// is kept verbatim.
			all := flatten(ctx)
			assert.Contains(t, all, "session 1 turn 7: fix the failing test", "the latest request is kept")
			assert.Contains(t, all, "Turn 7 is done", "the newest reply is kept")
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
	require.Len(t, s.Compactions(), 1)
	_, err := s.Undo()
	require.NoError(t, err)
	undone := s.Context()
	assert.Len(t, undone, len(msgs), "undo brings back every message")
	assert.Equal(t, flatten(msgs), flatten(undone))

	// The log sent back with more turns compacts again, on top of the
	// first compaction, whose summary the new one merges.
	more := codingSession(3, 6, 600)
	var log string
	require.NoError(t, json.Unmarshal(first.Session, &log))
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
	require.Equal(t, "compacted", got.Report.Action, "second compaction")
	s2 := replay(t, got.Session)
	require.Len(t, s2.Compactions(), 2)
	require.NoError(t, host.Validate(s2.Context(), false))
}

func TestCompactUnderThresholdReturnsTheSessionUnchanged(t *testing.T) {
	_, ts := start(t, nil)
	msgs := codingSession(4, 2, 200)
	var got CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, formats.OpenAI, msgs),
		Options: CompactOptions{Threshold: 0.8}}).decode(t, &got)
	assert.Equal(t, "none", got.Report.Action)
	assert.Equal(t, got.Report.TokensBefore, got.Report.TokensAfter)
	assert.True(t, got.Report.Fits)
	var sent bytes.Buffer
	require.NoError(t, json.Compact(&sent, encode(t, formats.OpenAI, msgs)))
	assert.Equal(t, sent.String(), string(got.Session), "the session comes back unchanged")

	// Over the threshold, it compacts.
	big := codingSession(4, 8, 600)
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, formats.OpenAI, big),
		Options: CompactOptions{Threshold: 0.3}}).decode(t, &got)
	assert.Equal(t, "compacted", got.Report.Action, "over the threshold")
}

func TestCompactDryRunPlansAndSendsNoSession(t *testing.T) {
	_, ts := start(t, nil)
	var got CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, "canonical", codingSession(5, 8, 600)),
		Options: CompactOptions{DryRun: true}}).decode(t, &got)
	p := got.Report.Plan
	assert.Equal(t, "plan", got.Report.Action)
	assert.Nil(t, got.Session)
	require.NotNil(t, p)
	assert.Positive(t, p.Folded)
	assert.Less(t, p.TokensKept, p.TokensBefore)
	assert.NotEmpty(t, p.FilesModified)
	assert.NotEmpty(t, p.FirstKeptID)
	// fits is about the tokens after, on a dry run too.
	assert.Equal(t, got.Report.TokensAfter <= got.Report.Budget, got.Report.Fits)
	assert.Equal(t, p.TokensKept+p.SummaryTokens, got.Report.TokensAfter)
}

func TestCompactNothingToFold(t *testing.T) {
	_, ts := start(t, nil)
	msgs := []abi.Message{text(abi.RoleUser, "hello"), text(abi.RoleAssistant, "hi")}
	var got CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, "canonical", msgs)}).decode(t, &got)
	assert.Equal(t, "nothing_to_fold", got.Report.Action)
	assert.True(t, got.Report.Fits)
	assert.Equal(t, flatten(msgs), flatten(contextOf(t, formats.Canonical, got.Session)), "the session is unchanged")
}

func TestCompactOptionsOverrideTheEngine(t *testing.T) {
	_, ts := start(t, nil)
	session := encode(t, formats.Anthropic, codingSession(6, 8, 600))

	var got CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session, Options: CompactOptions{
		EngineOptions: EngineOptions{Strategy: "truncate"}, Focus: "the nil check in the handler"}}).decode(t, &got)
	assert.Equal(t, "truncate", got.Report.Strategy)
	assert.Equal(t, "truncate", got.Report.RequestedStrategy)

	// A model sizes the budget; the server's tokenizer setting stays.
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session, Options: CompactOptions{
		EngineOptions: EngineOptions{Model: "gpt-4o"}, DryRun: true}}).decode(t, &got)
	assert.Equal(t, 128000, got.Report.ContextWindow)
	assert.Equal(t, "chars/4", got.Report.Tokenizer)
	assert.Equal(t, "gpt-4o", got.Report.Model)
	// With the tokenizer on auto, the model picks it.
	_, auto := start(t, func(o *Options) { o.Config.Tokenizer = "" })
	call(t, auto, "POST", "/v1/compact", CompactRequest{Session: session, Options: CompactOptions{
		EngineOptions: EngineOptions{Model: "gpt-4o"}, DryRun: true}}).decode(t, &got)
	assert.Equal(t, "o200k", got.Report.Tokenizer, "gpt-4o on auto")

	// A smaller window and keep figure fold more.
	var small CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session, Options: CompactOptions{
		EngineOptions: EngineOptions{ContextWindow: 16000, KeepRecentTokens: 1000}, DryRun: true}}).decode(t, &small)
	var def CompactResponse
	call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session, Options: CompactOptions{DryRun: true}}).decode(t, &def)
	assert.Equal(t, 16000, small.Report.ContextWindow)
	assert.Less(t, small.Report.Plan.Kept, def.Report.Plan.Kept, "keep_recent_tokens 1000 keeps fewer messages")

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
			r.wantError(t, tc.status, tc.code)
		})
	}
}

func TestCompactOutputFormats(t *testing.T) {
	_, ts := start(t, nil)
	msgs := codingSession(7, 8, 600)
	for _, out := range []string{formats.Canonical, formats.Anthropic, formats.OpenAI} {
		var got CompactResponse
		call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, "jsonl", msgs), OutputFormat: out}).decode(t, &got)
		require.Equal(t, out, got.Report.OutputFormat)
		if out != formats.Canonical {
			require.NotEmpty(t, got.Session)
			assert.Equal(t, byte('{'), got.Session[0], "%s output is a JSON object", out)
		}
		assert.NoError(t, host.Validate(contextOf(t, out, got.Session), false), "%s output", out)
	}
	r := call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, "jsonl", msgs), OutputFormat: formats.ClaudeCode})
	r.wantError(t, 400, CodeUnknownFormat)
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
	assert.Equal(t, formats.ClaudeCode, rep.Format)
	assert.Equal(t, "compacted", rep.Action)
	assert.Less(t, rep.TokensAfter, rep.TokensBefore)
	assert.True(t, rep.Fits)
	ctx := contextOf(t, formats.Anthropic, got.Session)
	require.NoError(t, host.Validate(ctx, false))
	assert.NotEmpty(t, rep.SkippedRecords, "a Claude Code file has records without conversation")
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
	e := r.wantError(t, http.StatusBadRequest, CodeInvalidSession)
	assert.Contains(t, e.Message, "nope")
}
