package eval

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/host/plugin"
)

// blankSummary forgets what it folds: a summary that answers nothing.
type blankSummary struct{}

func (blankSummary) Summarize(context.Context, plugin.Services, *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	return &abi.SummarizeResponse{Summary: "Earlier work happened.", Offline: true}, nil
}

// probeCorpus opens the prober and the codex-typescript session with its
// probes, or skips when the corpus is absent.
func probeCorpus(t *testing.T) (*prober, string, *ProbeSet, []abi.Message, []cost.Request) {
	t.Helper()
	pr, err := newProber("testdata/probes")
	require.NoError(t, err)
	t.Cleanup(pr.close)
	set := probeSetFor(pr.sets, "codex-typescript.jsonl")
	require.NotNil(t, set)
	path, err := probeSession(set, nil)
	if err != nil {
		t.Skipf("corpus: %v", err)
	}
	sess, _, err := loadSession(path)
	require.NoError(t, err)
	require.NoError(t, set.Resolve(sess.Messages))
	return pr, path, set, sess.Messages, nil
}

// A policy's probe score is read off what it leaves at each point, not
// the whole history: the threshold policy compacts at 64k, and summaries
// that forget lose an answer the whole history holds; a window nothing
// overflows answers everything verbatim. (Codex's turns are long: what the
// engine keeps of the turn in progress holds most answers whatever the
// summary.)
func TestPolicyProbesScoreWhatThePolicyLeaves(t *testing.T) {
	pr, _, set, msgs, _ := probeCorpus(t)
	all := 0
	for _, p := range set.Points {
		all += len(p.Probes)
	}
	run := func(strat interface{}, policy string, window, keep int) PolicyProbes {
		cfg, ok := probeEngineConfig(policy, "gpt-5.5", window, 16_000, cost.TTL5m, 0.5)
		require.True(t, ok)
		cfg.KeepRecentTokens = keep
		s := pr.strat
		if b, isBlank := strat.(blankSummary); isBlank {
			s = b
		}
		pp, err := probePolicy(context.Background(), s, cfg, msgs, set, nil, 9_600)
		require.NoError(t, err)
		return pp
	}
	// The gate's own keep (12k at 64k) holds most answers whatever the
	// summary says; a 1k keep leaves them to the summary.
	structured := run(nil, PolicyThreshold, 64_000, 0)
	assert.Equal(t, all, structured.Probes, "every probe scored")
	assert.GreaterOrEqual(t, structured.Compactions, 2)
	short := run(nil, PolicyThreshold, 64_000, 1_000)
	blank := run(blankSummary{}, PolicyThreshold, 64_000, 1_000)
	assert.Positive(t, blank.Compactions)
	assert.LessOrEqual(t, blank.Answered, short.Answered)
	assert.Less(t, blank.Answered, all, "what was folded into a summary that forgets is not scored as seen")
	verbatim := run(nil, PolicyNone, 1_000_000, 0)
	assert.Zero(t, verbatim.Compactions)
	assert.Equal(t, all, verbatim.Answered, "nothing folded: every answer is in the messages")

	_, ok := probeEngineConfig(PolicyAgent, "gpt-5.5", 64_000, 16_000, cost.TTL5m, 0.5)
	assert.False(t, ok, "the agent's own compactions are not the engine's")
}

// eval --cost --probes scores every policy but agent on the sessions
// with a probe set, and totals them.
func TestRunCostScoresProbesPerPolicy(t *testing.T) {
	_, path, set, _, _ := probeCorpus(t)
	all := 0
	for _, p := range set.Points {
		all += len(p.Probes)
	}
	rep, err := RunCost(CostOptions{Sessions: []string{path}, Window: 128_000, MaxOutputTokens: 32_000, Probes: "testdata/probes"})
	require.NoError(t, err)
	require.Len(t, rep.Sessions, 1)
	for _, pc := range rep.Sessions[0].Policies {
		if pc.Policy == PolicyAgent {
			assert.Nil(t, pc.Probe)
			continue
		}
		require.NotNil(t, pc.Probe, pc.Policy)
		assert.Equal(t, all, pc.Probe.Probes, pc.Policy)
	}
	for i, tot := range rep.Totals {
		assert.Equal(t, rep.Sessions[0].Policies[i].Probe, tot.Probe, tot.Policy)
	}
}
