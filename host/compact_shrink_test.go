package host

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// A summary bigger than what it replaces would make the context grow: the
// attempt fails and the next strategy is tried.
func TestCompactionThatDoesNotShrinkFallsBack(t *testing.T) {
	bloated := StrategyFunc(func(_ context.Context, _ pluginServices, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		return &abi.SummarizeResponse{Summary: filler("bloat", 20000)}, nil
	})
	good := &recorder{}
	e := newEngine(t, Config{ContextWindow: 200000, MaxOutputTokens: 2000, KeepRecentTokens: 2000, Fallbacks: []string{"narrative"}},
		WithStrategy("structured", bloated), WithStrategy("narrative", good))
	var falls []*FallbackEvent
	e.Subscribe(func(ev Event) {
		if f, ok := ev.(*FallbackEvent); ok {
			falls = append(falls, f)
		}
	})
	s := e.NewSession()
	coding(t, s, 4, 600)
	c, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	assert.Equal(t, "narrative", c.Strategy, "the bloated summary was kept")
	require.Len(t, falls, 1)
	assert.ErrorIs(t, falls[0].Err, ErrSummaryNotSmaller)
	assert.Less(t, c.TokensAfter, c.TokensBefore, "the compaction grew the context")
}

// Every strategy too big ends on the emergency path, never on a larger
// context.
func TestCompactionNeverGrowsTheContext(t *testing.T) {
	bloated := StrategyFunc(func(_ context.Context, _ pluginServices, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		return &abi.SummarizeResponse{Summary: filler("bloat", 20000)}, nil
	})
	e := newEngine(t, Config{ContextWindow: 200000, MaxOutputTokens: 2000, KeepRecentTokens: 2000},
		WithStrategy("structured", bloated))
	s := e.NewSession()
	coding(t, s, 4, 600)
	c, err := e.Compact(ctx, s, CompactOptions{})
	require.NoError(t, err)
	assert.True(t, c.Emergency, "got %+v", c)
	assert.Less(t, c.TokensAfter, c.TokensBefore, "the compaction grew the context")
}

// The request a summary must keep is the user's, read as the strategies
// read it (abi.RequestText): the harness's reminder inside it left out, and
// the harness's messages after it (a task notification, a skill's body)
// not taken for it. A summary that quotes it as a block quote carries it:
// nothing is appended. One that lacks it gets the user's words, not the
// harness's. A long request is added once, clipped with a note.
func TestVerifySummaryRequest(t *testing.T) {
	e := newEngine(t, Config{})
	s := e.NewSession()
	for _, m := range []Message{
		user("<system-reminder>be brief</system-reminder>Implement the plan:\n1. step one\n2. step two"),
		assistant("on it"),
		user("<task-notification>\n<status>completed</status>\n</task-notification>"),
		user("Base directory for this skill: /skills/review\n\n# Review"),
		assistant("done"),
	} {
		require.NoError(t, s.Append(m))
	}
	req := s.foldedRequest(len(s.msgs))
	require.Equal(t, "Implement the plan:\n1. step one\n2. step two", req)
	assert.Empty(t, s.foldedRequest(0), "a request that stays in the context was checked")

	quoted := "## Active Task\n> Implement the plan:\n> 1. step one\n> 2. step two\n"
	assert.Equal(t, strings.TrimRight(quoted, "\n"), e.verifySummary(quoted, &plan{latestRequest: req}), "a quoted request was appended again")
	got := e.verifySummary("## Active Task\nsomething else", &plan{latestRequest: req})
	assert.Contains(t, got, "## Latest User Request (verbatim)\nImplement the plan:\n1. step one\n2. step two")
	for _, harness := range []string{"system-reminder", "task-notification", "Base directory"} {
		assert.NotContains(t, got, harness)
	}

	long := strings.Repeat("line of a long pasted plan\n", 1000)
	got = e.verifySummary("## Active Task\nsomething else", &plan{latestRequest: long})
	assert.Equal(t, 1, strings.Count(got, "## Latest User Request (verbatim)"))
	assert.Contains(t, got, "of the request left out; the whole request is in the session log")
	assert.NotContains(t, got, "tool output")
	assert.LessOrEqual(t, len(got), maxAddedRequest+400)
}

// Past maxRequestWalk messages of harness text the walk gives up: nothing
// is checked rather than planning in time that grows with the session.
func TestFoldedRequestWalkIsBounded(t *testing.T) {
	e := newEngine(t, Config{})
	s := e.NewSession()
	require.NoError(t, s.Append(user("the task")))
	for i := 0; i < maxRequestWalk-1; i++ {
		require.NoError(t, s.Append(user("<task-notification>n</task-notification>")))
	}
	assert.Equal(t, "the task", s.foldedRequest(len(s.msgs)))
	require.NoError(t, s.Append(user("<task-notification>n</task-notification>")))
	assert.Empty(t, s.foldedRequest(len(s.msgs)))
}

// Codex's shell_command tool reads files with head and cat like any shell.
func TestShellCommandReadsAreRecorded(t *testing.T) {
	ops := newFileOps(nil)
	got := toolFileOps(ops.kindOf("shell_command"), []byte(`{"command":"head -n 50 src/app.ts && cat README.md","workdir":"/repo"}`))
	assert.Equal(t, []fileOp{{"src/app.ts", false}, {"README.md", false}}, got)
}
