package structured_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/pluginstest"
	"github.com/compact-host/compact-host/plugins/structured"
	"github.com/compact-host/compact-host/sdk"
)

func summarize(t *testing.T, host sdk.Host, req *abi.SummarizeRequest) *abi.SummarizeResponse {
	t.Helper()
	p := structured.New()
	resp, err := p.Strategy.Summarize(context.Background(), host, req)
	if err != nil {
		t.Fatalf("Summarize: %v", err)
	}
	return resp
}

// sectionOrder asserts that summary has the seven headings in order.
func sectionOrder(t *testing.T, summary string) {
	t.Helper()
	var titles []string
	for _, s := range digest.ParseSections(summary) {
		if s.Title != "" {
			titles = append(titles, s.Title)
		}
	}
	if strings.Join(titles, "|") != strings.Join(structured.Sections, "|") {
		t.Errorf("sections %q, want %q", titles, structured.Sections)
	}
}

func section(t *testing.T, summary, title string) string {
	t.Helper()
	body, ok := digest.Find(digest.ParseSections(summary), title)
	if !ok {
		t.Fatalf("no section %q in\n%s", title, summary)
	}
	return body
}

func TestOfflineGolden(t *testing.T) {
	cases := []struct {
		name string
		req  abi.SummarizeRequest
	}{
		{"offline-history", abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), TargetTokens: 4000}},
		{"offline-merge", abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary,
			FileOps: abi.FileOps{Modified: []string{"cmd/app/flags.go"}, Read: []string{"go.mod"}}, Focus: "error handling of registry.go", TargetTokens: 4000}},
		{"offline-turn-prefix", abi.SummarizeRequest{Kind: abi.FoldTurnPrefix, Messages: pluginstest.TurnPrefix(), TargetTokens: 2000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := summarize(t, pluginstest.NoModel(), &tc.req)
			if !resp.Offline {
				t.Error("Offline = false for a summary built without a model")
			}
			sectionOrder(t, resp.Summary)
			pluginstest.Golden(t, tc.name, []byte(resp.Summary))
		})
	}
}

func TestOfflineContent(t *testing.T) {
	resp := summarize(t, pluginstest.NoModel(), &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), ModelAvailable: false})
	s := resp.Summary
	if !strings.HasPrefix(s, structured.OfflineNote) {
		t.Errorf("summary does not open with the offline note:\n%s", s)
	}
	task := section(t, s, structured.ActiveTask)
	if !strings.Contains(task, "Yes, fix internal/plugin/registry.go the same way, and keep the error messages lowercase.") {
		t.Errorf("active task is not the latest request verbatim:\n%s", task)
	}
	if strings.Contains(task, "nil pointer when --config") {
		t.Errorf("active task holds an older request:\n%s", task)
	}
	files := section(t, s, structured.FilesArtifacts)
	for _, f := range []string{"internal/config/load.go", "internal/config/load_test.go", "internal/plugin/registry.go"} {
		if !strings.Contains(files, "`"+f+"`") {
			t.Errorf("files section lacks modified %s:\n%s", f, files)
		}
	}
	pending := section(t, s, structured.PendingItems)
	for _, want := range []string{"--- FAIL: TestLoadMissing", "fixed: `Bash go test ./internal/config/...` passed later", "TODO: the same pattern"} {
		assert.Contains(t, pending, want, "pending items")
	}
	next := section(t, s, structured.NextStep)
	assert.Contains(t, next, "Next I'll add a test for the registry so this cannot regress.", "next step")
	assert.NotContains(t, pending, "Next I'll add a test", "the next step is repeated under pending items")
	if d := section(t, s, structured.KeyDecisions); !strings.Contains(d, "I decided to return the error wrapped with %w instead of exiting") {
		t.Errorf("decisions lack the stated decision:\n%s", d)
	}
	if c := section(t, s, structured.Constraints); !strings.Contains(c, "Don't change the public API of package config.") {
		t.Errorf("constraints lack the user's rule:\n%s", c)
	}
	n := section(t, s, structured.Narrative)
	if !strings.Contains(n, "1. User: “The CLI crashes") || !strings.Contains(n, "2. User: the request in progress") {
		t.Errorf("narrative is not turn by turn:\n%s", n)
	}
}

func TestOfflineWhenHostHasNoModel(t *testing.T) {
	// The request says a model is there, but the host answers no_model.
	host := pluginstest.NoModel()
	resp := summarize(t, host, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), ModelAvailable: true})
	if !resp.Offline {
		t.Fatal("Offline = false after the host answered no_model")
	}
	sectionOrder(t, resp.Summary)
}

func TestModelErrorIsReturned(t *testing.T) {
	host := &pluginstest.Host{CompleteErr: abi.Errorf(abi.CodeModel, "upstream 500")}
	_, err := structured.New().Strategy.Summarize(context.Background(), host, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), ModelAvailable: true})
	if e := abi.AsError(err); err == nil || e.Code != abi.CodeModel {
		t.Fatalf("err = %v, want the model error so the host can fall back", err)
	}
}

func TestTargetTrimsNarrativeFirst(t *testing.T) {
	full := summarize(t, pluginstest.NoModel(), &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary})
	fullTokens := digest.EstimateTokens(full.Summary)
	narrativeTokens := digest.EstimateTokens(section(t, full.Summary, structured.Narrative))
	target := fullTokens - narrativeTokens/2
	small := summarize(t, pluginstest.NoModel(), &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary, TargetTokens: target})
	if got := digest.EstimateTokens(small.Summary); got > target {
		t.Errorf("summary is %d tokens, target %d", got, target)
	}
	for _, title := range []string{structured.ActiveTask, structured.KeyDecisions, structured.FilesArtifacts, structured.Constraints, structured.PendingItems} {
		if section(t, small.Summary, title) != section(t, full.Summary, title) {
			t.Errorf("section %q changed although trimming the narrative was enough", title)
		}
	}
	if !strings.Contains(section(t, small.Summary, structured.Narrative), "left out to fit the size target") {
		t.Error("trimmed narrative does not say what it left out")
	}

	// A target too small for anything: the task and modified files stay.
	tiny := summarize(t, pluginstest.NoModel(), &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary, TargetTokens: 10})
	sectionOrder(t, tiny.Summary)
	for _, want := range []string{"keep the error messages lowercase", "`internal/config/load_test.go`", "`internal/plugin/registry.go`", "`cmd/app/flags.go`"} {
		if !strings.Contains(tiny.Summary, want) {
			t.Errorf("tiny summary lost %q:\n%s", want, tiny.Summary)
		}
	}
	if strings.Contains(tiny.Summary, "`go.mod`") {
		t.Error("tiny summary kept a file that was only read")
	}
}

func TestTargetUsesHostCount(t *testing.T) {
	// A host whose tokenizer counts twice the estimate makes the summary
	// shrink to fit its count, not the estimate.
	req := &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary}
	full := summarize(t, pluginstest.NoModel(), req)
	target := digest.EstimateTokens(full.Summary) * 3 / 2
	req.TargetTokens = target
	host := &doubleCounter{Host: pluginstest.NoModel()}
	s := summarize(t, host, req).Summary
	if n, _ := host.CountTokens(context.Background(), s); n > target {
		t.Errorf("summary counts %d tokens on the host, target %d", n, target)
	}
}

type doubleCounter struct{ *pluginstest.Host }

func (d *doubleCounter) CountTokens(ctx context.Context, s string) (int, error) {
	return (len(s) + 1) / 2, nil
}

func TestMergesPreviousSummary(t *testing.T) {
	resp := summarize(t, pluginstest.NoModel(), &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary})
	s := resp.Summary
	if strings.Count(s, "## Active Task") != 1 {
		t.Errorf("previous summary pasted instead of merged:\n%s", s)
	}
	for title, want := range map[string]string{
		structured.FilesArtifacts: "`cmd/app/flags.go`",
		structured.KeyDecisions:   "gopkg.in/yaml.v3",
		structured.Constraints:    "Keep Go 1.22 compatibility.",
		structured.PendingItems:   "Document the flag in README.md.",
		structured.Narrative:      "Add a --config flag",
		structured.ActiveTask:     "Add a --config flag", // as the earlier task
	} {
		if !strings.Contains(section(t, s, title), want) {
			t.Errorf("section %q lost %q from the previous summary:\n%s", title, want, section(t, s, title))
		}
	}
	files := section(t, s, structured.FilesArtifacts)
	if strings.Count(files, "internal/config/load.go") != 1 {
		t.Errorf("a file in both summaries is listed twice:\n%s", files)
	}
	if !strings.Contains(strings.SplitN(section(t, s, structured.ActiveTask), "Earlier task", 2)[0], "keep the error messages lowercase") {
		t.Error("the new request is not the active task")
	}
}

func TestFoldTurnPrefixOffline(t *testing.T) {
	resp := summarize(t, pluginstest.NoModel(), &abi.SummarizeRequest{Kind: abi.FoldTurnPrefix, Messages: pluginstest.TurnPrefix()})
	task := section(t, resp.Summary, structured.ActiveTask)
	if !strings.Contains(task, "Rename the package util to textutil") || !strings.Contains(task, "turn in progress") {
		t.Errorf("turn prefix task:\n%s", task)
	}
	n := section(t, resp.Summary, structured.Narrative)
	for _, want := range []string{"`Bash git mv util textutil`", "`Edit cmd/app/main.go`", "`Bash go build ./...` → error: `internal/render/render.go:7:2: package acme/app/util is not in std"} {
		if !strings.Contains(n, want) {
			t.Errorf("turn steps lack %q:\n%s", want, n)
		}
	}
}

func TestOddInput(t *testing.T) {
	for name, msgs := range map[string][]abi.Message{
		"empty":       nil,
		"no requests": {pluginstest.Assistant("hello")},
		"orphans":     {pluginstest.Result("x", "dangling", true), {Role: "tool", Content: []abi.Block{{Type: "weird"}}}},
		"bad input":   {{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, ID: "a", Name: "Edit", Input: []byte("{not json")}}}},
	} {
		t.Run(name, func(t *testing.T) {
			resp := summarize(t, pluginstest.NoModel(), &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: msgs, TargetTokens: 500})
			sectionOrder(t, resp.Summary)
		})
	}
	_, err := structured.New().Strategy.Summarize(context.Background(), pluginstest.NoModel(), &abi.SummarizeRequest{Kind: "bogus"})
	if e := abi.AsError(err); err == nil || e.Code != abi.CodeInvalidRequest {
		t.Errorf("unknown kind: err = %v, want invalid_request", err)
	}
}

type tooLarge struct {
	*pluginstest.Host
	refuse int
	sizes  []int
}

func (h *tooLarge) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	h.sizes = append(h.sizes, len(req.Messages[0].Content[0].Text))
	if h.refuse > 0 {
		h.refuse--
		return nil, abi.Errorf(abi.CodeTooLarge, "prompt is too long")
	}
	return h.Host.Complete(ctx, req)
}

// The instruction appended to a resent conversation names the span by
// the message kept, asks for text only and for the seven sections, and
// carries the target, the focus and the modified files.
func TestInstruction(t *testing.T) {
	req := &abi.SummarizeRequest{PreviousSummary: "## Active Task\n> earlier", TargetTokens: 1500, Focus: "the parser",
		FileOps: abi.FileOps{Modified: []string{"parser.go"}}}
	kept := abi.Message{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "toolu_07", Text: "ok"}}}
	in := structured.Instruction(req, kept)
	for _, want := range []string{"do not call any tool", "not including, the result of tool call toolu_07.", "merge it into yours",
		"## Active Task\n", "## Session Narrative\n", "about 1500 tokens", "focus on: the parser", "parser.go"} {
		assert.Contains(t, in, want)
	}
	kept = abi.Message{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "step 12:   please\nread " + strings.Repeat("more ", 60)}}}
	in = structured.Instruction(&abi.SummarizeRequest{}, kept)
	assert.Contains(t, in, `the user message that begins "step 12: please read more`)
	assert.Contains(t, in, `…"`)
	assert.NotContains(t, in, "earlier compaction")
}
