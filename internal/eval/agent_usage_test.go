package eval

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Figures of hiddenSession: what the provider counts beyond the messages
// (a system prompt) and, after the agent's compaction, an encrypted
// summary the file does not show; and the provider's ratio to chars/4.
const (
	hiddenPrompt  = 5_000
	hiddenSummary = 15_000
	providerRatio = 1.2
)

// hiddenSession is a Codex-like session: turns of a request, a long tool
// result and a reply, with the usage a provider would record, and one
// compaction by the agent after foldAt messages that keeps only a short
// replacement history and a summary the file does not hold.
func hiddenSession(turns, foldAt int) *formats.Session {
	var msgs []abi.Message
	for i := range turns {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs,
			userText(fmt.Sprintf("Step %d: look at part %d", i, i)),
			assistantCall(id, "Read", fmt.Sprintf(`{"file_path":"/src/p%d.go"}`, i)),
			toolResults(result(id, strings.Repeat(fmt.Sprintf("line %d of p%d.go\n", i, i), 120))),
			abi.Message{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: fmt.Sprintf("Part %d read.", i)}}},
		)
	}
	for i := range msgs {
		msgs[i].ID = fmt.Sprintf("h%d", i)
	}
	replacement := []abi.Message{userText("Step 0: look at part 0")}
	counter, err := host.New(host.Config{ContextWindow: 100_000_000, Tokenizer: "chars", DisableCompaction: true})
	if err != nil {
		panic(err)
	}
	agent := counter.NewSession()
	hidden := hiddenPrompt
	for i := range msgs {
		if i == foldAt {
			agent = counter.NewSession()
			agent.Append(replacement...)
			hidden += hiddenSummary
		}
		if msgs[i].Role == abi.RoleAssistant {
			msgs[i].Usage = &abi.Usage{InputTokens: hidden + int(providerRatio*float64(agent.ContextTokens())), OutputTokens: 50}
		}
		agent.Append(msgs[i])
	}
	return &formats.Session{Format: "codex", Messages: msgs,
		AgentCompactions: []formats.AgentCompaction{{ID: "fold", FirstKept: foldAt, Replacement: replacement}}}
}

// TestUsageAfterAgentCompaction: after the agent compacts, the hidden
// summary is not read as a ratio of the small replacement history, so the
// usage fed to the replay stays at the provider's ratio of the replay's
// own context.
func TestUsageAfterAgentCompaction(t *testing.T) {
	s := hiddenSession(40, 80)
	acc, tr := account(ctx, s, "hidden")
	require.Equal(t, 80, acc.Reports)
	assert.InDelta(t, hiddenPrompt, acc.Overhead, 50, "the first report's gap is the system prompt")
	for i := 81; i < len(s.Messages); i++ {
		if s.Messages[i].Role != abi.RoleAssistant {
			continue
		}
		const sent = 20_000
		u := tr.usageFor(i, sent, s.Messages[i].Usage)
		require.NotNil(t, u, "message %d", i)
		assert.InDelta(t, providerRatio*sent, u.InputTokens, 0.05*sent, "message %d: usage fed for %d tokens sent", i, sent)
	}
}

// TestReplayAfterAgentCompactionNoSpuriousOverflow replays the session at
// a window its visible history never fills: no overflow, no compaction
// freeing under 3%, and every compaction's tokens after above zero.
func TestReplayAfterAgentCompactionNoSpuriousOverflow(t *testing.T) {
	s := hiddenSession(40, 80)
	_, tr := account(ctx, s, "hidden")
	r := replay(ctx, replayConfig{session: s, name: "hidden", window: 128_000, strategy: "forgetful", impl: forgetful, usage: tr})
	require.Empty(t, r.Err)
	assert.Zero(t, r.Overflows, "the translated usage overflowed a window the replayed context never filled")
	assert.Empty(t, r.Compactions, "the replayed context stays under the compaction point")

	// At a window the history does outgrow, compactions free what they
	// fold and report what remains.
	r = replay(ctx, replayConfig{session: s, name: "hidden", window: 16_000, strategy: "forgetful", impl: forgetful, usage: tr})
	require.Empty(t, r.Err)
	require.NotEmpty(t, r.Compactions)
	assert.Zero(t, r.Overflows)
	for _, c := range r.Compactions {
		assert.Positive(t, c.TokensAfter, "call %d: tokens after", c.Call)
		assert.GreaterOrEqual(t, float64(c.TokensBefore-c.TokensAfter), 0.03*float64(c.TokensBefore), "call %d: %d -> %d", c.Call, c.TokensBefore, c.TokensAfter)
	}
}

// TestTokensAfterNeverZeroWhileTokensRemain: a calibrated figure of zero
// for a context that still holds messages is reported as the chars/4
// estimate, and counted.
func TestTokensAfterNeverZeroWhileTokensRemain(t *testing.T) {
	msgs := workSession(2)
	eng, err := host.New(host.Config{ContextWindow: 100_000, Tokenizer: "chars", DisableCompaction: true})
	require.NoError(t, err)
	sess := eng.NewSession()
	require.NoError(t, sess.Append(msgs...))
	require.Positive(t, sess.ContextTokens())

	var r RunResult
	r.addCompaction(&host.CompactionEvent{Strategy: "forgetful", TokensBefore: 50_000, TokensAfter: 0}, 3, len(msgs), sess,
		map[string]int{}, newFoldedOps(msgs), msgs, ContextText(sess.Context()), 0, 0)
	require.Len(t, r.Compactions, 1)
	assert.Equal(t, sess.ContextTokens(), r.Compactions[0].TokensAfter)
	assert.True(t, r.Compactions[0].Uncalibrated)
	assert.Equal(t, 1, r.UncalibratedAfter)

	r = RunResult{}
	r.addCompaction(&host.CompactionEvent{Strategy: "forgetful", TokensBefore: 50_000, TokensAfter: 1_234}, 3, len(msgs), sess,
		map[string]int{}, newFoldedOps(msgs), msgs, ContextText(sess.Context()), 0, 0)
	assert.Equal(t, 1_234, r.Compactions[0].TokensAfter, "a calibrated figure above zero stands")
	assert.Zero(t, r.UncalibratedAfter)
}

// TestCorpusAgentCompactionsReplay replays the corpus sessions that hold
// an agent's own compaction at the windows the agents worked in: the
// replay reports no overflow the recorded session did not have, no
// compaction that frees under 3%, and no empty context after a compaction.
// At 32k the Codex and Copilot sessions' pinned system prompts (11k
// tokens) leave the kept tail little room: there too, no compaction frees
// under 3% or folds nothing, where runs of them did before the gate knew
// what a compaction can free.
func TestCorpusAgentCompactionsReplay(t *testing.T) {
	var sessions, pinned []string
	for _, path := range corpus(t) {
		s, _, err := loadSession(path)
		if err == nil && len(s.AgentCompactions) > 0 {
			sessions = append(sessions, path)
		}
		if base := filepath.Base(path); base == "codex-typescript.jsonl" || base == "copilot-cli.jsonl" {
			pinned = append(pinned, path)
		}
	}
	require.NotEmpty(t, sessions, "the corpus holds sessions with an agent's own compaction (Claude Code, Codex)")
	require.Len(t, pinned, 2, "the corpus holds the Codex and Copilot sessions")
	rep, err := Run(ctx, Options{Sessions: sessions, Windows: []int{200_000, 128_000}, Strategies: []string{"structured"}, InProcess: true})
	require.NoError(t, err)
	small, err := Run(ctx, Options{Sessions: pinned, Windows: []int{32_000}, Strategies: []string{"structured"}, InProcess: true})
	require.NoError(t, err)
	for _, r := range append(rep.Runs, small.Runs...) {
		require.Empty(t, r.Err, "%s at %d", r.Session, r.Window)
		assert.Zero(t, r.Overflows, "%s at %d: overflows", r.Session, r.Window)
		if r.Window > 32_000 {
			assert.Zero(t, r.Emergencies, "%s at %d: emergency compactions", r.Session, r.Window)
		} else {
			assert.NotEmpty(t, r.Compactions, "%s at %d: the session outgrows the window", r.Session, r.Window)
		}
		assert.Zero(t, r.UncalibratedAfter, "%s at %d", r.Session, r.Window)
		assert.Equal(t, r.Gates, r.ValidGates, "%s at %d: valid contexts", r.Session, r.Window)
		for _, c := range r.Compactions {
			assert.Positive(t, c.MessagesFolded, "%s at %d, call %d: a compaction folded nothing", r.Session, r.Window, c.Call)
			assert.GreaterOrEqual(t, float64(c.TokensBefore-c.TokensAfter), 0.03*float64(c.TokensBefore),
				"%s at %d, call %d (%s): %d -> %d", r.Session, r.Window, c.Call, c.Strategy, c.TokensBefore, c.TokensAfter)
		}
	}
}

func TestNotesNameUncalibratedCompactions(t *testing.T) {
	rep := &Report{Windows: []int{32_000}, Offline: true, Runs: []RunResult{{Session: "s.jsonl", Window: 32_000, Strategy: "structured", UncalibratedAfter: 2}}}
	joined := strings.Join(notes(rep), "\n")
	assert.Contains(t, joined, "s@32000/structured 2")
	rep.Runs[0].UncalibratedAfter = 0
	assert.NotContains(t, strings.Join(notes(rep), "\n"), "came out as 0 tokens")
}
