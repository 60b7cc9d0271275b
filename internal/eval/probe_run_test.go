package eval

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProbesCorpus runs the committed probes over the corpus with the
// structured strategy, offline, in process, and reports the score. It
// asserts that the score is computed, not a target: every point got a
// summary, and the same probes scored against an empty summary fail.
func TestProbesCorpus(t *testing.T) {
	probedCorpus(t)
	rep, err := RunProbes(ctx, ProbeOptions{Probes: filepath.Join("testdata", "probes"), InProcess: true})
	require.NoError(t, err)
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	t.Logf("\n%s", table.String())

	require.NotEmpty(t, rep.Points)
	for _, p := range rep.Points {
		assert.Empty(t, p.Err, "%s at %d", p.Session, p.At)
		if p.NotCompacted {
			assert.LessOrEqual(t, p.At, 2, "%s at %d: only a point at the first messages can hold a single one", p.Session, p.At)
			continue
		}
		assert.Positive(t, p.Folded, "%s at %d folded nothing", p.Session, p.At)
	}
	assert.Positive(t, rep.Total.Answered, "no probe answered by any summary")

	// Every compaction an agent made in a probed session has a point at
	// its cut, so its own summary is scored beside ours.
	compared := map[string]bool{}
	for _, c := range rep.AgentComparisons {
		compared[c.Session+"/"+c.CompactionID] = true
		require.Len(t, c.Results, c.Probes)
		agent, ours := 0, 0
		for _, r := range c.Results {
			agent += btoi(r.Agent)
			ours += btoi(r.Ours)
		}
		assert.Equal(t, agent, c.AgentAnswered, "%s @%d", c.Session, c.At)
		assert.Equal(t, ours, c.OursAnswered, "%s @%d", c.Session, c.At)
		assert.Positive(t, c.AgentTokens, "%s @%d: the agent's side is empty", c.Session, c.At)
	}
	sets, err := LoadProbes(filepath.Join("testdata", "probes"))
	require.NoError(t, err)
	agents := 0
	for _, set := range sets {
		path, err := probeSession(set, nil)
		require.NoError(t, err)
		sess, _, err := loadSession(path)
		require.NoError(t, err)
		for _, c := range sess.AgentCompactions {
			agents++
			assert.True(t, compared[set.Session+"/"+c.ID], "%s: the agent's compaction %s (cut at %d) has no probe point there", set.Session, c.ID, c.FirstKept)
		}
	}
	assert.Positive(t, agents, "the probed sessions hold no compaction of an agent")

	empty := &ProbeReport{}
	for _, s := range sets {
		for pi := range s.Points {
			empty.Points = append(empty.Points, scorePoint(ProbePointScore{Session: s.Session}, &s.Points[pi], ""))
		}
	}
	empty.tally()
	assert.Equal(t, rep.Total.Probes, empty.Total.Probes)
	assert.Zero(t, empty.Total.Answered, "an empty summary answers nothing")
	assert.Greater(t, rep.Total.Answered, empty.Total.Answered)
}

// TestProbesAnsweredByTheFoldedMessages checks the ground truth of the
// committed probes: the messages before each point, unsummarized, answer
// every probe of the point. A probe they do not answer asks for something
// the session had not shown yet, or its matcher has a typo.
func TestProbesAnsweredByTheFoldedMessages(t *testing.T) {
	probedCorpus(t)
	sets, err := LoadProbes(filepath.Join("testdata", "probes"))
	require.NoError(t, err)
	for _, set := range sets {
		path, err := probeSession(set, nil)
		require.NoError(t, err)
		sess, _, err := loadSession(path)
		require.NoError(t, err)
		require.NoError(t, set.Resolve(sess.Messages))
		for _, p := range set.Points {
			var folded []abi.Message
			for _, m := range sess.Messages[:p.At] {
				if !m.Pinned {
					folded = append(folded, m)
				}
			}
			text := ContextText(folded)
			norm, plain := normalize(text), foldProbe(text)
			for _, q := range p.Probes {
				assert.True(t, q.answered(norm, plain), "%s @%d %s/%s: the messages before the point do not answer it", set.Session, p.At, p.ID, q.ID)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestAgentProbeComparison scores an agent's compaction: its summary and
// the history it kept count, its system prompt does not (it stands beside
// any summary), and our side is taken from the point as scored.
func TestAgentProbeComparison(t *testing.T) {
	text := func(role, s string, pinned bool) abi.Message {
		return abi.Message{Role: role, Pinned: pinned, Content: []abi.Block{{Type: abi.BlockText, Text: s}}}
	}
	p := &ProbePoint{ID: "cut", At: 3, Probes: []Probe{
		{ID: "in-summary", Category: CategoryFact, Question: "q", AllOf: []string{"state.vscdb"}},
		{ID: "in-kept", Category: CategoryNextStep, Question: "q", AllOf: []string{"remap the workspaces"}},
		{ID: "in-system", Category: CategoryDecision, Question: "q", AllOf: []string{"orchestrator mode"}},
	}}
	for i := range p.Probes {
		require.NoError(t, p.Probes[i].compile())
	}
	c := formats.AgentCompaction{ID: "c1", FirstKept: 3, Summary: "The index lives in state.vscdb.", Replacement: []abi.Message{
		text(abi.RoleSystem, "You are in orchestrator mode.", true),
		text(abi.RoleUser, "Then remap the workspaces.", false),
	}}
	ours := scorePoint(ProbePointScore{Session: "s.json", At: 3, SummaryTokens: 40}, p, "Decided: orchestrator mode. Found: state.vscdb.")

	cmp := compareAgentProbes("cline", &c, p, ours)
	assert.Equal(t, "summary and replacement history", cmp.AgentText)
	assert.Equal(t, 3, cmp.Probes)
	assert.Equal(t, 2, cmp.AgentAnswered, "summary and replacement history, not the system prompt")
	require.NotNil(t, cmp.SummaryAnswered)
	assert.Equal(t, 1, *cmp.SummaryAnswered)
	assert.Equal(t, 2, cmp.OursAnswered)
	assert.Equal(t, 40, cmp.OursTokens)
	assert.Equal(t, []AgentProbeResult{
		{ID: "in-summary", Category: CategoryFact, Agent: true, Ours: true},
		{ID: "in-kept", Category: CategoryNextStep, Agent: true, Ours: false},
		{ID: "in-system", Category: CategoryDecision, Agent: false, Ours: true},
	}, cmp.Results)

	// An encrypted summary (Codex): the kept history is all there is.
	c.Summary = ""
	cmp = compareAgentProbes("codex", &c, p, ours)
	assert.Equal(t, "replacement history", cmp.AgentText)
	assert.Nil(t, cmp.SummaryAnswered)
	assert.Equal(t, 1, cmp.AgentAnswered)
}

// TestProbeSetsCoverTheCorpus walks both corpus folders: every session the
// readers read has a probe set, and each set asks about every category.
// A file no reader takes (Roo Code's UI log) has nothing to probe.
func TestProbeSetsCoverTheCorpus(t *testing.T) {
	probedCorpus(t)
	sets, err := LoadProbes(filepath.Join("testdata", "probes"))
	require.NoError(t, err)
	bySession := map[string]*ProbeSet{}
	for _, s := range sets {
		bySession[s.Session] = s
	}
	dirs, err := CorpusDirs()
	require.NoError(t, err)
	sessions := 0
	for _, dir := range dirs {
		files, err := CorpusSessions(dir)
		require.NoError(t, err)
		for _, f := range files {
			name := filepath.Base(f)
			if _, err := formats.ReadFile(f); errors.Is(err, formats.ErrUnknownFormat) {
				assert.NotContains(t, bySession, name)
				continue
			}
			sessions++
			set, ok := bySession[name]
			if !assert.True(t, ok, "%s has no probe set", f) {
				continue
			}
			perCategory := map[string]int{}
			for _, p := range set.Points {
				for _, q := range p.Probes {
					perCategory[q.Category]++
				}
			}
			for _, c := range ProbeCategories {
				assert.Positive(t, perCategory[c], "%s: no %s probe", set.File, c)
			}
		}
	}
	assert.Equal(t, len(sets), sessions, "a probe set whose session is in neither folder")
}

// probedCorpus skips a test of the committed probes unless both corpus
// folders are there: the probe sets name sessions of each.
func probedCorpus(t *testing.T) {
	t.Helper()
	corpus(t)
	if dirs, err := CorpusDirs(); err != nil || len(dirs) < 2 {
		t.Skipf("the probes name sessions of ../shared/corpus and ../shared/corpus-new; corpus-new is not beside the repository (%v)", dirs)
	}
}

// A probe set's session is looked up among the sessions given, then in
// each corpus folder; one in neither is an error naming both folders.
func TestProbeSessionLookup(t *testing.T) {
	probedCorpus(t)
	dirs, err := CorpusDirs()
	require.NoError(t, err)

	set := &ProbeSet{Session: "aider-ts-monorepo.md", File: "p.json"}
	path, err := probeSession(set, nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dirs[1], "aider-ts-monorepo.md"), path, "found in corpus-new")

	given := filepath.Join(t.TempDir(), "aider-ts-monorepo.md")
	path, err = probeSession(set, []string{"other.jsonl", given})
	require.NoError(t, err)
	assert.Equal(t, given, path, "a session given by hand comes first")

	set.Session = "absent.jsonl"
	_, err = probeSession(set, nil)
	require.ErrorIs(t, err, ErrNoSessions)
	for _, d := range dirs {
		assert.Contains(t, err.Error(), d)
	}
}
