package digest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/pluginstest"
)

func TestFindingsAndGist(t *testing.T) {
	msgs := []abi.Message{
		pluginstest.User("push it"),
		pluginstest.Assistant("Pushed. Commit `97ce79e9`."),
		pluginstest.Assistant("`WorkoutHistoryRepository` is registered at `AppContainer.swift:45`. Let me look at the view next."),
		pluginstest.Assistant("Opened https://github.com/acme/app/pull/1503 for review. The weather is nice today in the office."),
		pluginstest.Assistant("I decided to keep the cache because it is shared."),
	}
	var got []string
	for _, s := range digest.Findings(msgs, digest.Decisions(msgs)) {
		got = append(got, s.Text)
	}
	assert.Equal(t, []string{
		"Commit `97ce79e9`.",
		"`WorkoutHistoryRepository` is registered at `AppContainer.swift:45`.",
		"Opened https://github.com/acme/app/pull/1503 for review.",
	}, got)
	assert.Equal(t, "Evidence branch pushed at commit `5ff2118`.", digest.Gist("Done.\n\nEvidence branch pushed at commit `5ff2118`.", 100))
	assert.Equal(t, "Commit `97ce79e9`.", digest.Gist("Pushed. Commit `97ce79e9`.", 100), "short sentences alone are kept")
}

// An agent that reasons at length and says little (Copilot CLI, Claude
// thinking, Codex reasoning summaries) states its choices and findings in
// thinking blocks: they count, marked as reasoning.
func TestReasoningIsEvidence(t *testing.T) {
	thinking := abi.Message{Role: abi.RoleAssistant, Content: []abi.Block{
		{Type: abi.BlockThinking, Text: "The temp branch stays timestamped rather than reused, because two writers may conflict at once. The root cause is the missing lease in `pushResults`."},
		{Type: abi.BlockText, Text: "Rewriting the doc."},
	}}
	msgs := []abi.Message{pluginstest.User("simplify the design"), thinking}
	var decided []string
	for _, d := range digest.Decisions(msgs) {
		assert.True(t, d.Reasoning, d.Text)
		decided = append(decided, d.Text)
	}
	assert.Equal(t, []string{
		"The temp branch stays timestamped rather than reused, because two writers may conflict at once.",
		"The root cause is the missing lease in `pushResults`.",
	}, decided)
	assert.Equal(t, "Rewriting the doc.", msgs[1].Text(), "the visible text stays apart from the reasoning")
	assert.Contains(t, digest.Reasoning(&msgs[1]), "timestamped")
}

// A decision is a sentence with a choice in it: a reason alone ("because")
// is none, a cause is labelled as such, and a requirement the agent
// settles on is one.
func TestDecisionsNeedAChoice(t *testing.T) {
	msgs := []abi.Message{
		pluginstest.User("should the cache be on by default?"),
		pluginstest.Assistant("This will raise ValueError because the dict is not in the set. " +
			"The root cause is the stale key in the cache map. So it MUST be opt-in for existing users. " +
			"I'll keep the old flag rather than rename it."),
	}
	type labelled struct {
		Text  string
		Cause bool
	}
	var got []labelled
	for _, d := range digest.ClassifyDecisions(digest.Decisions(msgs), digest.Requests(msgs)) {
		got = append(got, labelled{d.Text, d.Cause})
	}
	assert.Equal(t, []labelled{
		{"The root cause is the stale key in the cache map.", true},
		{"So it MUST be opt-in for existing users.", false},
		{"I'll keep the old flag rather than rename it.", false},
	}, got)
}
