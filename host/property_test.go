package host

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// genSession appends a random session: turns of user requests, assistant
// replies with zero to four parallel tool calls whose results arrive in one
// or several messages, long turns, error results, pinned messages, and
// sometimes a final call still waiting for its result.
func genSession(t testing.TB, r *rand.Rand, s *Session) (pending bool) {
	turns := 1 + r.IntN(12)
	callN := 0
	for turn := 0; turn < turns; turn++ {
		req := user(fmt.Sprintf("request %d: %s", turn, filler("ask", 5+r.IntN(60))))
		req.Pinned = r.IntN(10) == 0
		require.NoError(t, s.Append(req))
		steps := r.IntN(4)
		if r.IntN(5) == 0 {
			steps += 10 // a long turn
		}
		for step := 0; step < steps; step++ {
			k := r.IntN(5)
			var calls []Block
			var ids []string
			for c := 0; c < k; c++ {
				callN++
				id := fmt.Sprintf("call%d", callN)
				ids = append(ids, id)
				calls = append(calls, call(id, []string{"Read", "Edit", "Bash", "Grep"}[r.IntN(4)], map[string]any{"file_path": fmt.Sprintf("f%d.go", r.IntN(30)), "command": "ls"}))
			}
			a := assistant(filler("think", r.IntN(80)), calls...)
			a.Pinned = k == 0 && r.IntN(15) == 0
			if len(a.Content) == 0 {
				a.Content = []Block{{Type: abi.BlockText, Text: "ok"}}
			}
			require.NoError(t, s.Append(a))
			if turn == turns-1 && step == steps-1 && k > 0 && r.IntN(4) == 0 {
				return true // the agent is running these calls now
			}
			// Results in one message or spread over several.
			for len(ids) > 0 {
				n := 1 + r.IntN(len(ids))
				var rs []Block
				for _, id := range ids[:n] {
					b := result(id, filler("out", r.IntN(1500)))
					b.IsError = r.IntN(8) == 0
					rs = append(rs, b)
				}
				ids = ids[n:]
				require.NoError(t, s.Append(results(rs...)))
			}
		}
		if r.IntN(2) == 0 {
			require.NoError(t, s.Append(assistant(filler("answer", 5+r.IntN(100)))))
		}
	}
	return false
}

func checkInvariants(t *testing.T, s *Session, d Decision, pending bool, latest string, pinned []string) {
	t.Helper()
	view := s.Context()
	require.NoError(t, Validate(view, pending), "invalid context after %s", d.Action)
	var all strings.Builder
	for _, m := range view {
		for _, b := range m.Content {
			all.WriteString(b.Text)
			all.WriteByte('\n')
		}
	}
	text := all.String()
	if latest != "" {
		require.True(t, mentions(text, latest), "latest user request lost after %s", d.Action)
	}
	for _, p := range pinned {
		require.Contains(t, text, p, "pinned message lost after %s", d.Action)
	}
	if d.Action != ActionNone {
		require.Less(t, d.TokensAfter, d.TokensBefore, "%s did not shrink the context", d.Action)
	}
}

func runProperty(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	window := 8000 + r.IntN(150000)
	strategies := map[string]Strategy{
		"ok":   &recorder{},
		"fail": &recorder{fail: errors.New("boom")},
		"empty": StrategyFunc(func(context.Context, pluginServices, *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
			return &abi.SummarizeResponse{}, nil
		}),
	}
	names := []string{"ok", "fail", "empty"}
	cfg := Config{
		ContextWindow: window, MaxOutputTokens: window / 10, Tokenizer: "chars",
		KeepRecentTokens: 500 + r.IntN(window/4), MinKeepMessages: 1 + r.IntN(4),
		PruneMinTokens: 200 + r.IntN(2000), EmergencyKeepMessages: 1 + r.IntN(10),
		Strategy: names[r.IntN(3)], Fallbacks: []string{names[r.IntN(3)], names[r.IntN(3)]},
		SummaryTokens: 200 + r.IntN(800),
	}
	opts := []Option{}
	for n, s := range strategies {
		opts = append(opts, WithStrategy(n, s))
	}
	e, err := New(cfg, opts...)
	require.NoError(t, err)
	e.log = discardLogger
	s := e.NewSession()
	pending := genSession(t, r, s)
	msgs := s.Messages()
	var latest string
	var pinned []string
	for i := range msgs {
		var prev *Message
		if i > 0 {
			prev = &msgs[i-1]
		}
		if t, ok := abi.RequestText(msgs[i]); ok && !abi.IsObservation(prev, &msgs[i]) {
			latest = t
		}
		if msgs[i].Pinned {
			pinned = append(pinned, strings.TrimSpace(msgs[i].Content[0].Text))
		}
	}
	for round := 0; round < 3; round++ {
		d, err := e.EnsureFits(ctx, s, Request{ToolSchemaTokens: r.IntN(window / 10)})
		if !errors.Is(err, ErrNothingToFold) {
			require.NoError(t, err, "seed %d", seed)
		}
		checkInvariants(t, s, d, pending, latest, pinned)
	}
	if r.IntN(2) == 0 {
		before := s.Context()
		if _, err := e.Compact(ctx, s, CompactOptions{}); err == nil {
			checkInvariants(t, s, Decision{}, pending, latest, pinned)
			_, err := s.Undo()
			require.NoError(t, err)
			require.Len(t, s.Context(), len(before), "undo changed the context")
		}
	}
}

func TestGateProperties(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 50
	}
	for seed := 0; seed < n; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runProperty(t, uint64(seed)) })
	}
}

func FuzzGate(f *testing.F) {
	for seed := uint64(0); seed < 8; seed++ {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { runProperty(t, seed) })
}
