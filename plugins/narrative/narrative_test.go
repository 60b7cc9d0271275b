package narrative_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/narrative"
	"github.com/compact-host/compact-host/plugins/pluginstest"
	"github.com/compact-host/compact-host/sdk"
)

func summarize(t *testing.T, host sdk.Host, req *abi.SummarizeRequest) *abi.SummarizeResponse {
	t.Helper()
	resp, err := narrative.New().Strategy.Summarize(context.Background(), host, req)
	if err != nil {
		t.Fatalf("Summarize: %v", err)
	}
	return resp
}

func TestOfflineGolden(t *testing.T) {
	cases := map[string]abi.SummarizeRequest{
		"offline-history":     {Kind: abi.FoldHistory, Messages: pluginstest.Session(), TargetTokens: 4000},
		"offline-merge":       {Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary, Focus: "registry errors", TargetTokens: 4000},
		"offline-turn-prefix": {Kind: abi.FoldTurnPrefix, Messages: pluginstest.TurnPrefix()},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			resp := summarize(t, pluginstest.NoModel(), &req)
			if !resp.Offline || !strings.HasPrefix(resp.Summary, narrative.OfflineNote) {
				t.Errorf("offline summary not marked offline (Offline=%v)", resp.Offline)
			}
			if strings.Contains(resp.Summary, "\n## ") {
				t.Error("narrative summary has section headings")
			}
			pluginstest.Golden(t, name, []byte(resp.Summary))
		})
	}
}

func TestOfflineContent(t *testing.T) {
	s := summarize(t, pluginstest.NoModel(), &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary, Focus: "registry"}).Summary
	for _, want := range []string{
		"> Yes, fix internal/plugin/registry.go the same way, and keep the error messages lowercase.",
		"`internal/config/load.go`", "`internal/config/load_test.go`", "`internal/plugin/registry.go`",
		"Add a --config flag", "Keep Go 1.22 compatibility.", // merged from the previous summary
		"focus on: registry",
		"--- FAIL: TestLoadMissing",
		"Then came the request in progress, quoted above.",
		"It said it would next: “Next I'll add a test for the registry so this cannot regress.”",
		"fixed: `Bash go test ./internal/config/...` passed later",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

func TestOfflineFitsTargetKeepingTask(t *testing.T) {
	req := &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary}
	full := summarize(t, pluginstest.NoModel(), req).Summary
	req.TargetTokens = digest.EstimateTokens(full) * 2 / 3
	s := summarize(t, pluginstest.NoModel(), req).Summary
	if got := digest.EstimateTokens(s); got > req.TargetTokens {
		t.Errorf("summary %d tokens, target %d", got, req.TargetTokens)
	}
	if strings.Contains(s, "Add a --config flag") {
		t.Error("the earlier story survived while the target forced cuts")
	}
	for _, want := range []string{"keep the error messages lowercase", "`internal/plugin/registry.go`"} {
		if !strings.Contains(s, want) {
			t.Errorf("fitted summary lost %q", want)
		}
	}
}

func TestModelPath(t *testing.T) {
	host := pluginstest.WithReplies("The user asked to fix the nil config crash; `internal/config/load.go` now wraps the error.")
	resp := summarize(t, host, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary, Focus: "registry", ModelAvailable: true, TargetTokens: 800})
	if resp.Offline {
		t.Error("Offline = true for a model summary")
	}
	reqs := host.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d calls, want 1", len(reqs))
	}
	user := reqs[0].Messages[0].Content[0].Text
	open, closing := strings.Index(user, digest.TranscriptOpen), strings.Index(user, digest.TranscriptClose)
	if open < 0 || closing < open || !strings.Contains(user[open:closing], "keep the error messages lowercase") {
		t.Fatal("transcript missing or not delimited")
	}
	for _, want := range []string{"<previous-summary>", "focus on: registry", "internal/plugin/registry.go"} {
		if !strings.Contains(user[:open], want) {
			t.Errorf("prompt lacks %q before the transcript", want)
		}
	}
	if !strings.Contains(reqs[0].System, "Do not continue it") {
		t.Error("system prompt does not say the transcript is data")
	}
	added := strings.SplitN(resp.Summary, "Also modified, per the host's record:", 2)
	if len(added) != 2 {
		t.Fatalf("modified files missing from the reply not added:\n%s", resp.Summary)
	}
	for _, f := range []string{"`internal/config/load_test.go`", "`internal/plugin/registry.go`", "`cmd/app/flags.go`"} {
		if !strings.Contains(added[1], f) {
			t.Errorf("%s not added", f)
		}
	}
	if strings.Contains(added[1], "`internal/config/load.go`") {
		t.Error("a file the reply names was added again")
	}
}

func TestModelEmptyTwiceFallsBackOffline(t *testing.T) {
	host := pluginstest.WithReplies("  ", "")
	resp := summarize(t, host, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), ModelAvailable: true})
	if n := len(host.Requests()); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
	if !resp.Offline {
		t.Error("an empty model reply did not lead to the offline summary")
	}
}

func TestNoModelAndModelErrors(t *testing.T) {
	resp := summarize(t, pluginstest.NoModel(), &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), ModelAvailable: true})
	if !resp.Offline {
		t.Error("no_model did not lead to the offline summary")
	}
	host := &pluginstest.Host{CompleteErr: abi.Errorf(abi.CodeDeadline, "too slow")}
	_, err := narrative.New().Strategy.Summarize(context.Background(), host, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), ModelAvailable: true})
	if e := abi.AsError(err); err == nil || e.Code != abi.CodeDeadline {
		t.Errorf("err = %v, want the deadline error", err)
	}
}

func TestTurnPrefixPrompt(t *testing.T) {
	host := pluginstest.WithReplies("ok")
	summarize(t, host, &abi.SummarizeRequest{Kind: abi.FoldTurnPrefix, Messages: pluginstest.TurnPrefix(), ModelAvailable: true})
	if !strings.Contains(host.Requests()[0].System, "beginning of one turn") {
		t.Error("turn prefix prompt does not say so")
	}
}

// The narrative prompt carries the same content requirements as the
// structured one.
func TestModelPromptStatesContentRequirements(t *testing.T) {
	host := pluginstest.WithReplies("The user asked to fix the crash.")
	summarize(t, host, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), ModelAvailable: true})
	reqs := host.Requests()
	require.NotEmpty(t, reqs)
	sys := reqs[0].System
	assert.Contains(t, sys, digest.ContentRules)
	assert.Contains(t, sys, "Open with the request in progress")
}
