package sessionio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
)

func engine(t *testing.T) *host.Engine {
	t.Helper()
	e, err := host.New(host.Config{ContextWindow: 8000, MaxOutputTokens: 1000, Tokenizer: "chars", KeepRecentTokens: 500, SummaryTokens: 200},
		host.WithStrategy("structured", host.StrategyFunc(func(_ context.Context, _ plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
			return &abi.SummarizeResponse{Summary: fmt.Sprintf("summary of %d messages", len(req.Messages))}, nil
		})))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// anthropicRequest is a Messages API request with a call and its result.
func anthropicRequest(turns int) []byte {
	var msgs []string
	for i := 0; i < turns; i++ {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"user","content":"step %d: run the tests"}`, i),
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"Bash","input":{"command":"go test ./..."}}]}`, i),
			fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":%q}]}`, i, strings.Repeat("ok  \tpkg\t0.1s\n", 40)),
			`{"role":"assistant","content":"done"}`)
	}
	return []byte(`{"system":"be careful","messages":[` + strings.Join(msgs, ",") + `]}`)
}

func TestReadFormatsAndErrors(t *testing.T) {
	e := engine(t)
	in, err := Read(e, "req.json", anthropicRequest(3), "")
	if err != nil || in.Format != formats.Anthropic || in.Log || in.Session.Len() != 13 {
		t.Fatalf("%+v %v", in, err)
	}
	// A session log keeps its compactions.
	if _, err := e.Compact(context.Background(), in.Session, host.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := Write(&log, in.Session, formats.Canonical); err != nil {
		t.Fatal(err)
	}
	back, err := Read(e, "log.jsonl", log.Bytes(), "")
	if err != nil || !back.Log || len(back.Session.Compactions()) != 1 {
		t.Fatalf("log read back: %+v %v", back, err)
	}
	// Malformed input names the file and line.
	_, err = Read(e, "bad.jsonl", []byte("{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"},\"uuid\":\"u\",\"sessionId\":\"s\"}\n{nope\n"), formats.ClaudeCode)
	var pe *formats.ParseError
	if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "bad.jsonl:2") {
		t.Fatalf("got %v", err)
	}
	// A result that answers no call is invalid for every provider.
	orphan := `{"type":"message","message":{"id":"m1","role":"user","content":[{"type":"tool_result","tool_use_id":"x","text":"?"}]}}` + "\n"
	var inv *InvalidError
	if _, err := Read(e, "o.jsonl", []byte(orphan), ""); !errors.As(err, &inv) {
		t.Fatalf("got %v", err)
	}
	// Calls still running at the end of a log are allowed, and said.
	pending := `{"type":"message","message":{"id":"m1","role":"user","content":[{"type":"text","text":"go"}]}}` + "\n" +
		`{"type":"message","message":{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]}}` + "\n"
	if in, err := Read(e, "p.jsonl", []byte(pending), ""); err != nil || !in.PendingTail {
		t.Fatalf("%+v %v", in, err)
	}
	if _, err := Read(e, "x", []byte("plain text"), ""); !errors.Is(err, formats.ErrUnknownFormat) {
		t.Fatalf("got %v", err)
	}
}

func TestCompactRuns(t *testing.T) {
	ctx := context.Background()
	e := engine(t)
	read := func() *host.Session {
		in, err := Read(e, "req.json", anthropicRequest(8), "")
		if err != nil {
			t.Fatal(err)
		}
		return in.Session
	}
	s := read()
	out, err := Compact(ctx, e, s, Options{DryRun: true})
	if err != nil || out.Action != ActionPlan || out.Plan == nil || out.TokensAfter >= out.TokensBefore || len(s.Compactions()) != 0 {
		t.Fatalf("dry run %+v %v", out, err)
	}
	out, err = Compact(ctx, e, s, Options{Threshold: 0.99})
	if err != nil || out.Action != ActionNone || len(s.Compactions()) != 0 {
		t.Fatalf("under threshold %+v %v", out, err)
	}
	out, err = Compact(ctx, e, s, Options{Focus: "the tests"})
	if err != nil || out.Action != ActionCompacted || out.Compaction == nil || out.TokensAfter >= out.TokensBefore || !out.Fits {
		t.Fatalf("compaction %+v %v", out, err)
	}
	var req bytes.Buffer
	if err := Write(&req, s, OutputFormat("", formats.Anthropic)); err != nil {
		t.Fatal(err)
	}
	again, err := Read(e, "out.json", req.Bytes(), formats.Anthropic)
	if err != nil || again.Session.Len() >= 33 {
		t.Fatalf("compacted request reads back as %v messages: %v", again.Session.Len(), err)
	}
	if OutputFormat("", formats.Codex) != formats.Canonical || OutputFormat(formats.OpenAI, formats.Codex) != formats.OpenAI {
		t.Error("OutputFormat")
	}
	if err := Write(&req, s, formats.Codex); err == nil {
		t.Error("writing codex must fail")
	}
}

// TestWriteKeepsTheRequest checks that a compacted request is the request
// read, with only the folded messages replaced: the model, tools,
// thinking signatures and unknown fields come out as they came in.
func TestWriteKeepsTheRequest(t *testing.T) {
	e := engine(t)
	body := anthropicRequest(3)
	body = append([]byte(`{"model":"claude-x","max_tokens":1024,"x_future":{"a":[1,2]},`), body[1:]...)
	in, err := Read(e, "req.json", body, "")
	require.NoError(t, err)
	var same bytes.Buffer
	require.NoError(t, Write(&same, in.Session, formats.Anthropic))
	assert.Equal(t, string(body), same.String(), "nothing compacted: the request must be unchanged")

	out, err := Compact(context.Background(), e, in.Session, Options{})
	require.NoError(t, err)
	require.Equal(t, ActionCompacted, out.Action)
	var compacted bytes.Buffer
	require.NoError(t, Write(&compacted, in.Session, formats.Anthropic))
	assert.True(t, bytes.HasPrefix(compacted.Bytes(), []byte(`{"model":"claude-x","max_tokens":1024,"x_future":{"a":[1,2]},"system":"be careful","messages":[`)), "%s", compacted.Bytes())
	assert.Contains(t, compacted.String(), "summary of")

	// Written as the other format, the request is converted.
	var converted bytes.Buffer
	require.NoError(t, Write(&converted, in.Session, formats.OpenAI))
	assert.NotContains(t, converted.String(), "x_future")
}
