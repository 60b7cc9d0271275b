package host

import (
	"fmt"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEmergencyKeepsTheLatestSummary: a session that starts from a
// summary (the agent's own, or ours written into its file) and then
// outgrows its window at once keeps that summary, and the user's latest
// request, when the emergency path drops the oldest messages.
func TestEmergencyKeepsTheLatestSummary(t *testing.T) {
	const facts = "Goal: migrate the billing service to Postgres. Done: schema in billing/db.go."
	for _, c := range []struct {
		name string
		msg  Message
	}{
		{"claude code continuation", user("This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n" + facts)},
		{"compact-host summary written into the file", user("[Context compacted: the summary below stands for 183 earlier messages. The messages after it are verbatim.]\n\n" + facts)},
		{"marked summary", func() Message { m := user(facts); m.Summary = true; return m }()},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, Config{ContextWindow: 20000, MaxOutputTokens: 2000, PruneMinTokens: 100000, EmergencyKeepMessages: 4},
				WithStrategy("structured", &recorder{}))
			s := e.NewSession()
			must(t, s.Append(c.msg))
			must(t, s.Append(assistant("Continuing with the migration.")))
			must(t, s.Append(user("port the invoices table too")))
			for i := range 6 {
				id := fmt.Sprintf("r%d", i)
				must(t, s.Append(assistant("Reading.", call(id, "Read", map[string]any{"file_path": fmt.Sprintf("part%d.sql", i)}))))
				must(t, s.Append(results(result(id, filler("part", 3600)))))
			}
			b := e.Budget()
			require.GreaterOrEqual(t, float64(s.ContextTokens()), b.EmergencyAt*float64(b.Input))
			d, err := e.EnsureFits(ctx, s, Request{})
			require.NoError(t, err)
			require.Equal(t, ActionEmergency, d.Action, "%+v", d)
			require.NoError(t, Validate(s.Context(), false))
			text := contextText(s)
			assert.True(t, strings.Contains(text, facts), "the summary the session started from was dropped")
			assert.True(t, strings.Contains(text, "port the invoices table too"), "the latest request was dropped")
			var summaries int
			for _, m := range s.Context() {
				if m.Summary {
					summaries++
				}
			}
			assert.Equal(t, 1, summaries, "one summary message stands for the dropped history")
			assert.Equal(t, abi.RoleUser, s.Context()[0].Role)
		})
	}
}
