package digest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/pluginstest"
)

// What the commands named is kept by name, once each at its latest
// mention, oldest first: the pull request opened, the branch pushed, the
// commit made, the tracker item updated; a failed command and a flag of
// another tool name nothing.
func TestRefs(t *testing.T) {
	call, result, assistant := pluginstest.Call, pluginstest.Result, pluginstest.Assistant
	msgs := []abi.Message{
		pluginstest.User("open a draft PR for the design"),
		assistant("", call("1", "bash", args{"command": "git checkout -b conflict-free-sync && git commit -am 'docs: design'"})),
		result("1", "Switched to a new branch 'conflict-free-sync'\n[conflict-free-sync 1a2b3c4] docs: design\n 1 file changed\n", false),
		assistant("", call("2", "bash", args{"command": "git push -u origin conflict-free-sync 2>&1 | tail -5"})),
		result("2", "remote: https://github.com/acme/app/pull/new/conflict-free-sync\n * [new branch]      conflict-free-sync -> conflict-free-sync\n", false),
		assistant("", call("3", "bash", args{"command": "gh pr create --draft --title design"})),
		result("3", "https://github.com/acme/app/pull/1503\n", false),
		assistant("", call("4", "bash", args{"command": "bd update av-raf --append-notes 'PR 1503'"})),
		result("4", "✓ Updated issue: av-raf — epic(results): conflict-free sync\n", false),
		assistant("", call("5", "bash", args{"command": "gh api repos/acme/app/pulls/172/comments | jq ."})),
		result("5", "[]\n", false),
		assistant("", call("6", "bash", args{"command": "git worktree list --porcelain | rg -n main -C 2"})),
		result("6", "worktree /src\n", false),
		assistant("", call("7", "bash", args{"command": "gh pr view 999"})),
		result("7", "no pull requests found", true),
	}
	var got []string
	for _, r := range digest.Refs(digest.Calls(msgs)) {
		got = append(got, r.String())
	}
	assert.Equal(t, []string{
		"commit `1a2b3c4`: on `conflict-free-sync`, “docs: design”",
		"branch `conflict-free-sync`: a pull request can be opened at https://github.com/acme/app/pull/new/conflict-free-sync",
		"PR #1503: https://github.com/acme/app/pull/1503",
		"issue `av-raf`: “Updated issue: av-raf — epic(results): conflict-free sync”",
		"PR #172",
	}, got)
}
