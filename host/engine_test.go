package host

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/tokens"
	"github.com/compact-host/compact-host/host/plugin"
)

var ctx = context.Background()

func TestConfigDefaultsAndErrors(t *testing.T) {
	e, err := New(Config{Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	b := e.Budget()
	if b.ContextWindow != 200000 || b.Input != 136000 || b.PruneAt != 0.70 || b.EmergencyAt != 0.95 {
		t.Errorf("budget %+v", b)
	}
	if got := b.CompactAt; got < 0.749 || got > 0.751 {
		t.Errorf("compact point %v, want 0.85-0.10", got)
	}
	if e.Tokenizer() != "chars/4" {
		t.Errorf("claude tokenizer %s", e.Tokenizer())
	}
	if e, _ := New(Config{Model: "gpt-4o"}); e.Tokenizer() != "o200k" {
		t.Errorf("gpt-4o tokenizer %s", e.Tokenizer())
	}
	floor, _ := New(Config{ContextWindow: 1000, CompactThreshold: 0.15, OverheadReserve: 0.10})
	if floor.Budget().CompactAt != 0.1 {
		t.Errorf("compact point floor: %v", floor.Budget().CompactAt)
	}
	for name, cfg := range map[string]Config{
		"no model":        {},
		"unknown model":   {Model: "no-such-model"},
		"threshold range": {ContextWindow: 1000, PruneThreshold: 1.5},
		"emergency low":   {ContextWindow: 1000, EmergencyThreshold: 0.5},
		"bad tokenizer":   {ContextWindow: 1000, Tokenizer: "words"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestBelowThresholdDoesNothing(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{}, WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 2, 100)
	before := s.Context()
	d, err := e.EnsureFits(ctx, s, Request{ToolSchemaTokens: 500})
	if err != nil || d.Action != ActionNone || !d.Fits {
		t.Fatalf("decision %+v err %v", d, err)
	}
	if d.TokensBefore != s.ContextTokens()+500 {
		t.Errorf("overhead not counted: %d vs %d", d.TokensBefore, s.ContextTokens()+500)
	}
	if !reflect.DeepEqual(before, s.Context()) || len(rec.calls()) != 0 {
		t.Error("session changed below threshold")
	}
}

func TestPruneShortensOldToolResults(t *testing.T) {
	e := newEngine(t, Config{ContextWindow: 100000, MaxOutputTokens: 10000, PruneMinTokens: 500, KeepRecentTokens: 8000, CompactThreshold: 0.95, OverheadReserve: -1, EmergencyThreshold: 0.99},
		WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	coding(t, s, 6, 3000) // 18 results of 3000 tokens: ~60k tokens, 0.6 of budget
	must(t, s.Append(user("and now?")))
	var events []Event
	e.Subscribe(func(ev Event) { events = append(events, ev) })
	d, err := e.EnsureFits(ctx, s, Request{ToolSchemaTokens: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if d.Action != ActionPruned || d.TokensAfter >= d.TokensBefore {
		t.Fatalf("decision %+v", d)
	}
	ctxMsgs := s.Context()
	if err := Validate(ctxMsgs, false); err != nil {
		t.Fatal(err)
	}
	// Old results are shortened with a notice; the newest ones are intact.
	first := ctxMsgs[2].Content[0].Text
	if !strings.Contains(first, "omitted to save context") || len(first) > 2200 {
		t.Errorf("old result not pruned: %d bytes", len(first))
	}
	last := ctxMsgs[len(ctxMsgs)-4].Content[0]
	if last.Type != abi.BlockToolResult || strings.Contains(last.Text, "omitted") {
		t.Errorf("protected result was pruned: %q", last.Text[:80])
	}
	// The originals stay.
	if orig := s.Messages()[2].Content[0].Text; strings.Contains(orig, "omitted") {
		t.Error("original message was changed")
	}
	if len(events) != 1 {
		t.Fatalf("events %v", events)
	}
	if pe, ok := events[0].(*PruneEvent); !ok || pe.Results == 0 || pe.TokensAfter >= pe.TokensBefore {
		t.Errorf("prune event %+v", events[0])
	}
}

func TestCompactionSplicesVerifiesAndUndoes(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 3000}, WithStrategy("structured", rec))
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s, err := e.OpenSession(path)
	must(t, err)
	must(t, s.Append(Message{Role: abi.RoleSystem, Pinned: true, Content: []Block{{Type: abi.BlockText, Text: "You are careful."}}}))
	coding(t, s, 5, 950)
	original := s.Context()
	var got []*CompactionEvent
	e.Subscribe(func(ev Event) {
		if c, ok := ev.(*CompactionEvent); ok {
			got = append(got, c)
		}
	})
	d, err := e.EnsureFits(ctx, s, Request{})
	must(t, err)
	if d.Action != ActionCompacted || d.TokensAfter >= d.TokensBefore || !d.Fits {
		t.Fatalf("decision %+v", d)
	}
	after := s.Context()
	must(t, Validate(after, false))
	if after[0].Role != abi.RoleSystem || !after[0].Pinned {
		t.Error("pinned system message not first")
	}
	sum := after[1]
	if !sum.Summary || sum.Role != abi.RoleUser || !strings.Contains(sum.Content[0].Text, "SUMMARY(history)") {
		t.Fatalf("summary message %+v", sum)
	}
	// The strategy did not name files; verification appended them.
	if !strings.Contains(sum.Content[0].Text, "## Modified Files") || !strings.Contains(sum.Content[0].Text, "pkg0/edit0.go") {
		t.Errorf("modified files not appended:\n%s", sum.Content[0].Text)
	}
	reqs := rec.calls()
	if len(reqs) == 0 || reqs[0].Kind != abi.FoldHistory || reqs[0].ModelAvailable {
		t.Fatalf("requests %+v", reqs)
	}
	if len(reqs[0].FileOps.Modified) == 0 || reqs[0].TargetTokens <= 0 {
		t.Errorf("request lacks file ops or target: %+v", reqs[0])
	}
	for _, m := range reqs[0].Messages {
		if m.Pinned {
			t.Error("pinned message sent for folding")
		}
	}
	if len(got) != 1 || got[0].Strategy != "structured" || got[0].TokensAfter >= got[0].TokensBefore || got[0].MessagesFolded == 0 || !got[0].Offline {
		t.Fatalf("events %+v", got)
	}

	// Reopening the log reproduces the view.
	must(t, s.Close())
	s2, err := e.OpenSession(path)
	must(t, err)
	if !reflect.DeepEqual(s2.Context(), after) {
		t.Fatal("reopened session differs")
	}
	// Undo restores the original context exactly, and survives a reopen.
	c, err := s2.Undo()
	must(t, err)
	if c.ID != "c1" || !reflect.DeepEqual(s2.Context(), original) {
		t.Fatal("undo did not restore the original context")
	}
	must(t, s2.Close())
	s3, err := e.OpenSession(path)
	must(t, err)
	if !reflect.DeepEqual(s3.Context(), original) {
		t.Fatal("undo lost on reopen")
	}
	if _, err := s3.Undo(); !errors.Is(err, ErrNothingToUndo) {
		t.Errorf("second undo: %v", err)
	}
}

func TestSecondCompactionMergesPreviousSummary(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 5, 600)
	_, err := e.Compact(ctx, s, CompactOptions{})
	must(t, err)
	coding(t, s, 3, 600)
	_, err = e.Compact(ctx, s, CompactOptions{Focus: "the auth bug"})
	must(t, err)
	var last *abi.SummarizeRequest
	for _, r := range rec.calls() {
		if r.Kind == abi.FoldHistory {
			last = r
		}
	}
	if !strings.Contains(last.PreviousSummary, "SUMMARY(history)") || last.Focus != "the auth bug" {
		t.Fatalf("second request: previous=%q focus=%q", last.PreviousSummary, last.Focus)
	}
	for _, m := range last.Messages {
		if m.Summary {
			t.Error("previous summary message re-sent as a message to fold")
		}
	}
	must(t, Validate(s.Context(), false))
	if n := len(s.Compactions()); n != 2 {
		t.Fatalf("%d compactions", n)
	}
	s.Undo()
	if !strings.Contains(s.Context()[0].Content[0].Text, "SUMMARY(history) of") {
		t.Error("undo of the second compaction should bring back the first")
	}
}

func TestCutKeepsParallelResultsWithTheirCalls(t *testing.T) {
	e := newEngine(t, Config{KeepRecentTokens: 10, MinKeepMessages: 1}, WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	must(t, s.Append(user("go")))
	must(t, s.Append(assistant("", call("a", "Bash", map[string]any{"command": "ls"}), call("b", "Bash", map[string]any{"command": "pwd"}), call("c", "Bash", map[string]any{"command": "id"}))))
	must(t, s.Append(results(result("a", filler("a", 500)))))
	must(t, s.Append(results(result("b", filler("b", 500)))))
	must(t, s.Append(results(result("c", filler("c", 500)))))
	// Only the cut after message 4 or before message 1 is valid.
	for i, want := range []bool{true, true, false, false, false} {
		if s.cutAt(i) != want {
			t.Errorf("cutAt(%d) = %v", i, s.cutAt(i))
		}
	}
	if !s.cutAt(5) {
		t.Error("end is a valid cut when every call is answered")
	}
	must(t, s.Append(assistant("", call("d", "Bash", map[string]any{"command": "make"}))))
	if s.cutAt(6) {
		t.Error("end is not a valid cut while a call waits")
	}
	if cut := s.findCut(0, 10, 1); cut != 5 {
		t.Errorf("findCut = %d, want 5 (before the waiting call)", cut)
	}
	must(t, s.Append(results(result("d", "ok"))))
	_, err := e.Compact(ctx, s, CompactOptions{})
	must(t, err)
	must(t, Validate(s.Context(), false))
}

func TestCutInsideLongTurnFoldsPrefixSeparately(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", rec))
	s := e.NewSession()
	must(t, s.Append(user("first task")))
	must(t, s.Append(assistant("done")))
	must(t, s.Append(user("second task: a long one")))
	for i := 0; i < 12; i++ {
		id := "x" + string(rune('a'+i))
		must(t, s.Append(assistant("step", call(id, "Bash", map[string]any{"command": "make test"}))))
		must(t, s.Append(results(result(id, filler("out", 600)))))
	}
	_, err := e.Compact(ctx, s, CompactOptions{})
	must(t, err)
	reqs := rec.calls()
	if len(reqs) != 2 || reqs[0].Kind != abi.FoldHistory || reqs[1].Kind != abi.FoldTurnPrefix {
		t.Fatalf("want a history and a turn-prefix request, got %d", len(reqs))
	}
	if reqs[0].Messages[0].Content[0].Text != "first task" || requestText(&reqs[1].Messages[0]) != "second task: a long one" {
		t.Error("history and prefix split at the wrong place")
	}
	ctxMsgs := s.Context()
	must(t, Validate(ctxMsgs, false))
	text := ctxMsgs[0].Content[0].Text
	if !strings.Contains(text, "## Current Turn So Far") || !strings.Contains(text, "second task: a long one") {
		t.Errorf("summary lacks the turn prefix or the active request:\n%s", text)
	}
	if ctxMsgs[1].Role != abi.RoleAssistant {
		t.Errorf("kept part starts with %s", ctxMsgs[1].Role)
	}
}

func TestPinnedMessagesAreNeverFolded(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 1000}, WithStrategy("structured", rec))
	s := e.NewSession()
	must(t, s.Append(user("start")))
	must(t, s.Append(Message{Role: abi.RoleUser, Pinned: true, Content: []Block{{Type: abi.BlockText, Text: "PLAN: never touch prod"}}}))
	coding(t, s, 4, 500)
	_, err := e.Compact(ctx, s, CompactOptions{})
	must(t, err)
	found := false
	for _, m := range s.Context() {
		if m.Pinned && m.Content[0].Text == "PLAN: never touch prod" {
			found = true
		}
	}
	if !found {
		t.Fatal("pinned message lost")
	}
	for _, r := range rec.calls() {
		for _, m := range r.Messages {
			if m.Pinned {
				t.Fatal("pinned message folded")
			}
		}
	}
}

func TestFallbackChainAndEmergency(t *testing.T) {
	bad := &recorder{fail: errors.New("model exploded")}
	empty := StrategyFunc(func(context.Context, pluginServices, *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		return &abi.SummarizeResponse{Summary: "  "}, nil
	})
	good := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000, Fallbacks: []string{"narrative", "truncate"}},
		WithStrategy("structured", bad), WithStrategy("narrative", empty), WithStrategy("truncate", good))
	var falls []*FallbackEvent
	e.Subscribe(func(ev Event) {
		if f, ok := ev.(*FallbackEvent); ok {
			falls = append(falls, f)
		}
	})
	s := e.NewSession()
	coding(t, s, 4, 600)
	c, err := e.Compact(ctx, s, CompactOptions{})
	must(t, err)
	if c.Strategy != "truncate" || len(falls) != 2 || falls[0].To != "narrative" || !errors.Is(falls[1].Err, ErrEmptySummary) {
		t.Fatalf("strategy %s, fallbacks %+v", c.Strategy, falls)
	}

	// Every strategy failing ends on the emergency path, which always works.
	good.fail = errors.New("also broken")
	coding(t, s, 4, 600)
	c, err = e.Compact(ctx, s, CompactOptions{})
	must(t, err)
	if !c.Emergency || c.Strategy != StrategyEmergency {
		t.Fatalf("got %+v", c)
	}
	must(t, Validate(s.Context(), false))
	if !strings.Contains(s.Context()[0].Content[0].Text, "emergency") {
		t.Error("emergency notice missing")
	}
}

// pluginServices shortens the signature in test literals.
type pluginServices = plugin.Services

func TestBreakerOpensAfterConsecutiveFailures(t *testing.T) {
	bad := &recorder{fail: errors.New("down")}
	e := newEngine(t, Config{KeepRecentTokens: 1000, Fallbacks: []string{"truncate"}, BreakerFailures: 3, BreakerCooldown: time.Hour},
		WithStrategy("structured", bad), WithStrategy("truncate", &recorder{}))
	for i := 0; i < 5; i++ {
		s := e.NewSession()
		coding(t, s, 3, 500)
		_, err := e.Compact(ctx, s, CompactOptions{})
		must(t, err)
	}
	if n := len(bad.calls()); n != 3 {
		t.Fatalf("failing strategy called %d times, want 3 before the breaker opened", n)
	}
}

func TestSmallSavingsAreNotRepeated(t *testing.T) {
	rec := &recorder{}
	// Keeping almost everything frees little.
	e := newEngine(t, Config{ContextWindow: 12000, MaxOutputTokens: 1000, KeepRecentTokens: 9000, MinKeepMessages: 1, PruneMinTokens: 100000}, WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 5, 550)
	d, err := e.EnsureFits(ctx, s, Request{})
	must(t, err)
	if d.Action != ActionCompacted {
		t.Fatalf("first check: %+v", d)
	}
	n := len(rec.calls())
	for i := 0; i < 3; i++ {
		e.EnsureFits(ctx, s, Request{})
	}
	if len(rec.calls()) != n {
		t.Fatalf("compaction repeated without new content: %d calls", len(rec.calls()))
	}
	must(t, s.Append(user("one more thing")))
	d, err = e.EnsureFits(ctx, s, Request{})
	must(t, err)
	if len(rec.calls()) == n || d.Action != ActionCompacted {
		t.Fatal("new content did not re-enable compaction")
	}
}

func TestVerificationAppendsLatestRequest(t *testing.T) {
	e := newEngine(t, Config{KeepRecentTokens: 1500}, WithStrategy("structured", StrategyFunc(func(context.Context, pluginServices, *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		return &abi.SummarizeResponse{Summary: "Worked on things."}, nil
	})))
	s := e.NewSession()
	must(t, s.Append(user("Refactor the parser in internal/parse so that errors carry line numbers")))
	for i := 0; i < 10; i++ {
		id := "c" + string(rune('a'+i))
		must(t, s.Append(assistant("", call(id, "Write", map[string]any{"file_path": "internal/parse/p" + string(rune('a'+i)) + ".go", "content": "x"}))))
		must(t, s.Append(results(result(id, filler("w", 400)))))
	}
	_, err := e.Compact(ctx, s, CompactOptions{})
	must(t, err)
	text := s.Context()[0].Content[0].Text
	for _, want := range []string{"Refactor the parser in internal/parse so that errors carry line numbers", "internal/parse/pa.go", "## Modified Files"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
}

func TestChunksWhenFoldedHistoryExceedsSummarizerWindow(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{ContextWindow: 200000, MaxOutputTokens: 8000, KeepRecentTokens: 2000, SummarizerBudget: 8000, SummaryTokens: 1000},
		WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 20, 1500)
	_, err := e.Compact(ctx, s, CompactOptions{})
	must(t, err)
	reqs := rec.calls()
	if len(reqs) < 2 {
		t.Fatalf("%d requests; the history should have been chunked", len(reqs))
	}
	for i, r := range reqs {
		n := 0
		for j := range r.Messages {
			n += e.CountTokens(r.Messages[j].Content[0].Text)
		}
		if n > 8000 {
			t.Errorf("request %d carries %d tokens, over the summarizer budget", i, n)
		}
		if i > 0 && r.Kind == abi.FoldHistory && !strings.Contains(r.PreviousSummary, "SUMMARY") {
			t.Errorf("chunk %d does not merge the previous chunk's summary", i)
		}
	}
}

func TestCalibrationAndSilentOverflow(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 1, 200)
	for i := 0; i < 3; i++ {
		e.EnsureFits(ctx, s, Request{})
		reported := s.ContextTokens() * 13 / 10 // the provider counts 30% more
		must(t, e.AppendReply(s, Message{Role: abi.RoleAssistant, Content: []Block{{Type: abi.BlockText, Text: "ok"}}, Usage: &Usage{InputTokens: reported - 100, CacheReadTokens: 100}}))
		must(t, s.Append(user("more")))
	}
	f, n := e.Calibration()
	if n != 3 || f < 1.28 || f > 1.32 {
		t.Fatalf("factor %v after %d reports", f, n)
	}
	// Usage above the window forces a compaction at the next check.
	coding(t, s, 3, 300)
	e.EnsureFits(ctx, s, Request{})
	must(t, e.AppendReply(s, Message{Role: abi.RoleAssistant, Content: []Block{{Type: abi.BlockText, Text: "ok"}}, Usage: &Usage{InputTokens: 25000}}))
	d, err := e.EnsureFits(ctx, s, Request{})
	must(t, err)
	if d.Action < ActionCompacted {
		t.Fatalf("silent overflow did not force compaction: %+v", d)
	}
}

func TestEmergencyPathAtThreshold(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{ContextWindow: 20000, MaxOutputTokens: 2000, PruneMinTokens: 100000, EmergencyKeepMessages: 4}, WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 3, 1950) // over 0.95 of the 18k budget
	d, err := e.EnsureFits(ctx, s, Request{})
	must(t, err)
	if d.Action != ActionEmergency || !d.Fits {
		t.Fatalf("decision %+v", d)
	}
	if len(rec.calls()) != 0 {
		t.Error("the emergency path called a strategy")
	}
	must(t, Validate(s.Context(), false))
}

func TestDisabledCompactionOnlyMeasures(t *testing.T) {
	e := newEngine(t, Config{DisableCompaction: true, PruneMinTokens: 100000}, WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	coding(t, s, 4, 1800)
	d, err := e.EnsureFits(ctx, s, Request{})
	must(t, err)
	if d.Action != ActionNone || d.Fits {
		t.Fatalf("decision %+v", d)
	}
}

func TestOpenSessionReportsBadLineAndTornTail(t *testing.T) {
	e := newEngine(t, Config{})
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"type":"message","message":{"role":"user","content":[]}}`+"\n"+`{"type":"wat"}`+"\n"), 0o644)
	if _, err := e.OpenSession(bad); err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") || !strings.Contains(err.Error(), "unknown entry type") {
		t.Fatalf("got %v", err)
	}
	torn := filepath.Join(dir, "torn.jsonl")
	os.WriteFile(torn, []byte(`{"type":"message","message":{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}]}}`+"\n"+`{"type":"mess`), 0o644)
	s, err := e.OpenSession(torn)
	must(t, err)
	if s.Torn() == nil || s.Len() != 1 {
		t.Fatalf("torn %v len %d", s.Torn(), s.Len())
	}
	must(t, s.Append(user("next")))
	s.Close()
	s2, err := e.OpenSession(torn)
	must(t, err)
	if s2.Len() != 2 || s2.Torn() != nil {
		t.Fatalf("after repair: len %d torn %v", s2.Len(), s2.Torn())
	}
}

func TestDuplicateIDRejected(t *testing.T) {
	s := newEngine(t, Config{}).NewSession()
	must(t, s.Append(Message{ID: "a", Role: abi.RoleUser}))
	if err := s.Append(Message{ID: "a", Role: abi.RoleUser}); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("got %v", err)
	}
}

func TestPlanInspectAndWriteLog(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", rec))
	s := e.NewSession()
	coding(t, s, 6, 700)
	p, err := e.Plan(s, CompactOptions{})
	must(t, err)
	if p.Folded == 0 || p.Kept == 0 || p.Folded+p.Kept != s.Len() || p.TokensKept < 2000 || p.TokensKept >= p.TokensBefore || len(rec.calls()) != 0 {
		t.Fatalf("plan %+v", p)
	}
	b := e.Inspect(s, 3)
	if b.Tokens != s.ContextTokens() || len(b.Largest) != 3 || b.Largest[0].Tool != "Read" || b.ByRole.ToolResults <= b.ByRole.User {
		t.Fatalf("breakdown %+v", b)
	}
	if b.CrossedPrune < 0 || b.CrossedCompact < b.CrossedPrune {
		t.Errorf("threshold crossings %+v", b)
	}
	d, err := e.EnsureFits(ctx, s, Request{})
	must(t, err)
	if d.Action == ActionNone {
		t.Fatal("setup: no action")
	}
	c, err := e.Compact(ctx, s, CompactOptions{})
	must(t, err)
	if c.FoldedThrough == "" {
		t.Fatal("no compaction")
	}
	path := filepath.Join(t.TempDir(), "copy.jsonl")
	f, err := os.Create(path)
	must(t, err)
	must(t, s.WriteLog(f))
	f.Close()
	s2, err := e.LoadSession(path)
	must(t, err)
	if !reflect.DeepEqual(s2.Context(), s.Context()) {
		t.Fatal("log copy reads back to a different context")
	}
}

// fakeModel answers every completion and reports a prompt 40% larger than
// chars/4 counts, half of it from the cache.
type fakeModel struct{ name string }

func (f fakeModel) Model() string { return f.name }

func (f fakeModel) Complete(_ context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	est := (len(req.System) + 3) / 4
	for i := range req.Messages {
		est += tokens.Message(tokens.Chars(), &req.Messages[i])
	}
	n := est * 14 / 10
	return &abi.CompleteResponse{Text: "summary by the model", Model: f.name, Usage: abi.Usage{InputTokens: n / 2, CacheReadTokens: n - n/2, OutputTokens: 10}}, nil
}

func TestSummarizerUsageCalibratesTheSameModel(t *testing.T) {
	asks := StrategyFunc(func(ctx context.Context, svc pluginServices, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		resp, err := svc.Complete(ctx, &abi.CompleteRequest{System: "Summarize.", Messages: req.Messages})
		if err != nil {
			return nil, err
		}
		return &abi.SummarizeResponse{Summary: resp.Text}, nil
	})
	for _, tc := range []struct {
		model      string
		calibrated bool
	}{{"claude-sonnet-4-5", true}, {"claude-haiku-4-5", false}} {
		e := newEngine(t, Config{Model: "claude-sonnet-4-5", Tokenizer: "chars", KeepRecentTokens: 2000},
			WithStrategy("structured", asks), WithModel(fakeModel{tc.model}))
		var ev *CompactionEvent
		e.Subscribe(func(x Event) {
			if c, ok := x.(*CompactionEvent); ok {
				ev = c
			}
		})
		s := e.NewSession()
		coding(t, s, 4, 600)
		if _, err := e.Compact(ctx, s, CompactOptions{}); err != nil {
			t.Fatal(err)
		}
		f, n := e.Calibration()
		if tc.calibrated && (n == 0 || f < 1.39 || f > 1.41) {
			t.Errorf("%s: factor %v after %d reports, want 1.4", tc.model, f, n)
		}
		if !tc.calibrated && n != 0 {
			t.Errorf("%s: another model's usage calibrated the engine", tc.model)
		}
		if ev == nil || ev.ModelUsage.CacheReadTokens == 0 || ev.CostUSD <= 0 || ev.Offline {
			t.Errorf("%s: event %+v lacks usage or cost", tc.model, ev)
		}
	}
}

// A provider that counts exactly what the engine estimates must leave the
// calibration at 1 across compactions: the report after a gate that acted
// is paired with the context as the gate left it.
func TestCalibrationStaysRightAcrossCompactions(t *testing.T) {
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	compactions := 0
	for turn := 0; turn < 12; turn++ {
		coding(t, s, 1, 500)
		d, err := e.EnsureFits(ctx, s, Request{ToolSchemaTokens: 300})
		must(t, err)
		if d.Action >= ActionCompacted {
			compactions++
		}
		reported := s.ContextTokens() + 300
		must(t, e.AppendReply(s, Message{Role: abi.RoleAssistant, Content: []Block{{Type: abi.BlockText, Text: "next"}}, Usage: &Usage{InputTokens: reported}}))
		must(t, s.Append(user("go on")))
	}
	if compactions == 0 {
		t.Fatal("setup: no compaction happened")
	}
	f, n := e.Calibration()
	if n != 12 || math.Abs(f-1) > 0.001 || e.CalibrationOffset() != 0 {
		t.Fatalf("factor %v offset %d after %d reports and %d compactions", f, e.CalibrationOffset(), n, compactions)
	}
}
