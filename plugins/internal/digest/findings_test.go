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
