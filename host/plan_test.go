package host

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// refPlan is the plan as it was worked out before the pinned index and the
// file-operation index: every folded message visited and copied, the file
// operations replayed from the first message.
func refPlan(t *testing.T, e *Engine, s *Session, keep int) (*plan, error) {
	t.Helper()
	p := &plan{start: s.viewStart, previous: s.previousSummary(), generation: len(s.compactions)}
	p.cut = s.findCut(p.start, keep, e.cfg.MinKeepMessages)
	if p.cut <= p.start {
		return nil, ErrNothingToFold
	}
	p.turn = s.turnStart(p.cut)
	histEnd := p.cut
	if p.turn > p.start && p.turn < p.cut {
		histEnd = p.turn
	}
	for i := p.start; i < p.cut; i++ {
		if s.msgs[i].msg.Pinned {
			continue
		}
		p.folded++
		if i < histEnd {
			p.history = append(p.history, s.viewOf(i))
		} else {
			p.prefix = append(p.prefix, s.viewOf(i))
		}
	}
	if p.folded == 0 {
		return nil, ErrNothingToFold
	}
	ref := newRefFileOps()
	for i := 0; i < p.cut; i++ {
		for _, b := range s.msgs[i].msg.Content {
			if b.Type == abi.BlockToolUse {
				for _, op := range refToolFileOps(s.files.kindOf(b.Name), b.Input) {
					ref.add(op.path, op.modified)
				}
			}
		}
	}
	p.files = ref.snapshot()
	for i := len(s.msgs) - 1; i >= 0; i-- {
		if s.isObservation(i) {
			continue
		}
		m := &s.msgs[i].msg
		if t, ok := abi.RequestText(*m); ok {
			if i < p.cut && !m.Pinned {
				p.latestRequest = t
			}
			break
		}
	}
	p.turnNo = len(s.requests)
	return p, nil
}

// assertSamePlans compares the plan, the collected messages and Engine.Plan
// with the reference at several amounts kept.
func assertSamePlans(t *testing.T, e *Engine, s *Session) {
	t.Helper()
	for _, keep := range []int{1, 500, 5000, 40000, 400000} {
		want, werr := refPlan(t, e, s, keep)
		got, gerr := e.makePlan(s, keep)
		if werr != nil {
			assert.ErrorIs(t, gerr, werr, "keep %d", keep)
			continue
		}
		require.NoError(t, gerr, "keep %d", keep)
		got.collect(s)
		assert.Equal(t, want.history, got.history, "history, keep %d", keep)
		assert.Equal(t, want.prefix, got.prefix, "turn prefix, keep %d", keep)
		for _, f := range []struct {
			name      string
			want, got any
		}{
			{"cut", want.cut, got.cut}, {"turn", want.turn, got.turn}, {"folded", want.folded, got.folded},
			{"files", want.files, got.files}, {"latest request", want.latestRequest, got.latestRequest},
			{"previous", want.previous, got.previous}, {"turn number", want.turnNo, got.turnNo},
		} {
			assert.Equal(t, f.want, f.got, "%s, keep %d", f.name, keep)
		}
		pub, err := e.Plan(s, CompactOptions{KeepRecentTokens: keep})
		require.NoError(t, err)
		assert.Equal(t, len(want.prefix) > 0, pub.TurnPrefix, "Plan.TurnPrefix, keep %d", keep)
		assert.Equal(t, want.folded, pub.Folded, "Plan.Folded, keep %d", keep)
		assert.Equal(t, s.Len()-want.cut, pub.Kept, "Plan.Kept, keep %d", keep)
		assert.Equal(t, want.files, pub.FileOps, "Plan.FileOps, keep %d", keep)
	}
}

func TestPlanMatchesReplayCorpus(t *testing.T) {
	for _, name := range corpusFiles {
		t.Run(name, func(t *testing.T) {
			e, s := repeatedSession(t, corpusMessages(t, name), 1000)
			assertSamePlans(t, e, s)
			// After a compaction the plan starts at the kept messages.
			_, err := e.Compact(ctx, s, CompactOptions{KeepRecentTokens: 20000})
			require.NoError(t, err)
			assertSamePlans(t, e, s)
		})
	}
}

// TestPlanMatchesReplaySynthetic plans sessions with pinned messages inside
// the folded range and inside a long turn, pruned results and file
// operations of every kind.
func TestPlanMatchesReplaySynthetic(t *testing.T) {
	e, err := New(Config{ContextWindow: 2_000_000, MaxOutputTokens: 8000, Tokenizer: "chars"}, WithStrategy("structured", &recorder{}))
	require.NoError(t, err)
	s := e.NewSession()
	pin := user("Rules: keep the tests green.")
	pin.Pinned = true
	require.NoError(t, s.Append(Message{Role: abi.RoleSystem, Pinned: true, Content: []Block{{Type: abi.BlockText, Text: "system prompt"}}}, pin))
	for turn := range 12 {
		require.NoError(t, s.Append(user(fmt.Sprintf("turn %d: change the parser", turn))))
		for step := range 6 {
			id := fmt.Sprintf("t%ds%d", turn, step)
			tools := []Block{
				call(id+"r", "Read", map[string]any{"file_path": fmt.Sprintf("p/f%d.go", (turn+step)%9)}),
				call(id+"e", "Edit", map[string]any{"file_path": fmt.Sprintf("p/f%d.go", (turn*step)%7)}),
				call(id+"b", "Bash", map[string]any{"command": fmt.Sprintf("cat p/g%d.go | tee out/%d.log", step, turn)}),
			}
			require.NoError(t, s.Append(assistant("working", tools...),
				results(result(id+"r", filler("read", 3000)), result(id+"e", "ok"), result(id+"b", filler("bash", 200)))))
			if step == 3 {
				p := user(fmt.Sprintf("note pinned in turn %d", turn))
				p.Pinned = true
				require.NoError(t, s.Append(p))
			}
		}
		require.NoError(t, s.Append(assistant("done")))
	}
	assertSamePlans(t, e, s)
	require.Positive(t, e.prune(s, 2000), "nothing pruned")
	assertSamePlans(t, e, s)
}
