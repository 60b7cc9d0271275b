package structured_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/pluginstest"
	"github.com/compact-host/compact-host/plugins/structured"
)

const completeReply = `Here is the summary.

## Active Task
> Yes, fix internal/plugin/registry.go the same way, and keep the error messages lowercase.
Fixed with sed; a test is next.

## Next Step
Add a test for the registry.

## Key Decisions & Rationale
- Return the wrapped error instead of nil, nil.

## Files & Artifacts
- ` + "`internal/config/load.go`" + `: returns fmt.Errorf("config: open %s: %w").
- ` + "`internal/config/load_test.go`" + `: TestLoadMissing.
- ` + "`internal/plugin/registry.go`" + `: same fix.

## Constraints & Requirements
- Don't change the public API of package config.

## Pending Items
- Add a registry test.

## Session Narrative
The crash was reproduced by TestLoadMissing, fixed, then the same fix went into the registry.
`

func TestModelPrompt(t *testing.T) {
	host := pluginstest.WithReplies(completeReply)
	req := &abi.SummarizeRequest{
		Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary,
		FileOps: abi.FileOps{Modified: []string{"cmd/app/flags.go"}}, Focus: "registry error handling", TargetTokens: 1500, ModelAvailable: true,
	}
	resp := summarize(t, host, req)
	if resp.Offline {
		t.Error("Offline = true for a model summary")
	}
	reqs := host.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d completion calls for a complete reply, want 1", len(reqs))
	}
	sys, user := reqs[0].System, reqs[0].Messages[0].Content[0].Text
	for _, title := range structured.Sections {
		if !strings.Contains(sys, "## "+title) {
			t.Errorf("system prompt does not ask for %q", title)
		}
	}
	if !strings.Contains(sys, "Do not continue it") || !strings.Contains(sys, "verbatim") {
		t.Errorf("system prompt lacks the data-not-dialogue or verbatim rule:\n%s", sys)
	}
	open, closing := strings.Index(user, digest.TranscriptOpen), strings.Index(user, digest.TranscriptClose)
	if open < 0 || closing < open {
		t.Fatalf("transcript is not delimited:\n%s", user)
	}
	transcript := user[open:closing]
	if !strings.Contains(transcript, "keep the error messages lowercase") || !strings.Contains(transcript, "go test ./internal/config/...") {
		t.Error("transcript lacks the conversation")
	}
	before := user[:open]
	for _, want := range []string{"<previous-summary>", "Keep Go 1.22 compatibility.", "Merge it", "registry error handling", "cmd/app/flags.go"} {
		if !strings.Contains(before, want) {
			t.Errorf("prompt lacks %q before the transcript", want)
		}
	}
	if strings.Contains(transcript, "<previous-summary>") {
		t.Error("previous summary placed inside the transcript")
	}
	sectionOrder(t, resp.Summary)
	if strings.Contains(resp.Summary, "Here is the summary") {
		t.Error("preamble before the first heading was kept")
	}
	// cmd/app/flags.go is in the host's record but not in the reply.
	if !strings.Contains(section(t, resp.Summary, structured.FilesArtifacts), "`cmd/app/flags.go` (modified)") {
		t.Errorf("a modified file missing from the reply was not added:\n%s", resp.Summary)
	}
}

func TestModelRepairsMissingSections(t *testing.T) {
	partial := "## Active Task\nFix the registry.\n\n## Session Narrative\nThings happened.\n"
	host := pluginstest.WithReplies(partial, completeReply)
	resp := summarize(t, host, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), ModelAvailable: true})
	reqs := host.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d completion calls, want 2 (one repair)", len(reqs))
	}
	repair := reqs[1].Messages
	if len(repair) != 3 || repair[1].Role != abi.RoleAssistant || repair[1].Content[0].Text != partial {
		t.Fatalf("repair call does not carry the first reply: %+v", repair)
	}
	ask := repair[2].Content[0].Text
	for _, missing := range []string{structured.KeyDecisions, structured.FilesArtifacts, structured.Constraints, structured.PendingItems} {
		if !strings.Contains(ask, missing) {
			t.Errorf("repair request does not name %q:\n%s", missing, ask)
		}
	}
	sectionOrder(t, resp.Summary)
	if !strings.Contains(resp.Summary, "Add a registry test.") {
		t.Errorf("repaired reply not used:\n%s", resp.Summary)
	}
}

func TestModelMissingSectionsFilledOffline(t *testing.T) {
	// Two replies that both lack sections: the missing ones come from
	// the transcript, the model's own sections are kept.
	partial := "## Active Task\nFix the registry.\n\n## Pending Items\n- Add a registry test.\n\n## Notes\nExtra heading.\n"
	host := pluginstest.WithReplies(partial)
	resp := summarize(t, host, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), ModelAvailable: true})
	if n := len(host.Requests()); n != 2 {
		t.Fatalf("%d completion calls, want 2", n)
	}
	sectionOrder(t, resp.Summary)
	if got := section(t, resp.Summary, structured.ActiveTask); got != "Fix the registry." {
		t.Errorf("model's active task replaced: %q", got)
	}
	pending := section(t, resp.Summary, structured.PendingItems)
	if !strings.Contains(pending, "Add a registry test.") || !strings.Contains(pending, "**Notes**") {
		t.Errorf("model's pending items or extra heading lost:\n%s", pending)
	}
	if files := section(t, resp.Summary, structured.FilesArtifacts); !strings.Contains(files, "`internal/plugin/registry.go`") {
		t.Errorf("missing files section not filled from the transcript:\n%s", files)
	}
	if d := section(t, resp.Summary, structured.KeyDecisions); !strings.Contains(d, "I decided to return the error wrapped") {
		t.Errorf("missing decisions not filled from the transcript:\n%s", d)
	}
}

func TestModelTurnPrefixPrompt(t *testing.T) {
	host := pluginstest.WithReplies(completeReply)
	summarize(t, host, &abi.SummarizeRequest{Kind: abi.FoldTurnPrefix, Messages: pluginstest.TurnPrefix(), ModelAvailable: true})
	sys := host.Requests()[0].System
	if !strings.Contains(sys, "beginning of one turn") || !strings.Contains(sys, "what has been done so far") {
		t.Errorf("turn prefix prompt does not say it is a turn prefix:\n%s", sys)
	}
}

func TestModelPromptShrinksWhenTooLarge(t *testing.T) {
	host := &tooLarge{Host: pluginstest.WithReplies(completeReply), refuse: 1}
	big := pluginstest.Session()
	for i := range 300 {
		id := fmt.Sprintf("big%d", i)
		big = append(big, pluginstest.Assistant("", pluginstest.Call(id, "Bash", pluginstest.Args{"command": "cat log"})),
			pluginstest.Result(id, strings.Repeat("log line\n", 600), false))
	}
	summarize(t, host, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: big, ModelAvailable: true})
	if len(host.sizes) != 2 || host.sizes[1] >= host.sizes[0] {
		t.Errorf("prompt sizes %v, want a second, smaller prompt after too_large", host.sizes)
	}
}

// The model is asked for what the offline summary keeps: the seven
// sections, the request in progress whole, the next step and where it
// comes from, per-file changes, rejected options labelled, errors with
// their resolution, no repeats, valid markdown.
func TestModelPromptStatesContentRequirements(t *testing.T) {
	host := pluginstest.WithReplies(completeReply)
	summarize(t, host, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), ModelAvailable: true})
	reqs := host.Requests()
	require.NotEmpty(t, reqs)
	sys := reqs[0].System
	for _, title := range structured.Sections {
		assert.Contains(t, sys, "## "+title+"\n")
		assert.Contains(t, sys, "- "+title+": ", "the prompt does not say what goes under %q", title)
	}
	for _, want := range []string{
		"request in progress", "quoted verbatim and in full, once", "latest plan or todo list", "last stated intention",
		"failing tests or errors not yet fixed", "added, changed or removed", `"Rejected:"`, "Never list a rejected option as a decision",
		"resolved", "do not repeat text", "close every",
	} {
		assert.Contains(t, sys, want)
	}
}
