package host

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// bigSession is 10,000 messages of about 1M tokens (chars/4) in turns of a
// request, a call and its result.
func bigSession(b *testing.B) (*Engine, *Session) {
	e, err := New(Config{ContextWindow: 2_000_000, MaxOutputTokens: 32000, Tokenizer: "chars"}, WithStrategy("structured", &recorder{}))
	require.NoError(b, err)
	s := e.NewSession()
	out := filler("out", 345)
	for i := 0; len(s.msgs) < 10000; i++ {
		id := fmt.Sprintf("c%d", i)
		must(b, s.Append(user(fmt.Sprintf("step %d", i))))
		must(b, s.Append(assistant("running", call(id, "Bash", map[string]any{"command": "go test ./..."}))))
		must(b, s.Append(results(result(id, out))))
		must(b, s.Append(assistant("ok")))
	}
	tok := s.ContextTokens()
	require.GreaterOrEqual(b, tok, 900_000, "want about 1M tokens")
	require.LessOrEqual(b, tok, 1_200_000, "want about 1M tokens")
	return e, s
}

// BenchmarkEnsureFitsBelowThreshold is the gate's fast path. Target: ≤ 1 µs/op, 0 allocs/op.
func BenchmarkEnsureFitsBelowThreshold(b *testing.B) {
	e, s := bigSession(b)
	req := Request{ToolSchemaTokens: 5000}
	b.ReportAllocs()
	for b.Loop() {
		d, err := e.EnsureFits(ctx, s, req)
		if err != nil || d.Action != ActionNone {
			require.Failf(b, "the fast path acted", "%+v %v", d, err)
		}
	}
}

// BenchmarkFindCut finds where to cut the 10,000-message session. Target: ≤ 200 µs.
func BenchmarkFindCut(b *testing.B) {
	_, s := bigSession(b)
	b.ReportAllocs()
	for b.Loop() {
		if cut := s.findCut(0, 40000, 2); cut <= 0 {
			require.Fail(b, "no cut")
		}
	}
}

// BenchmarkMakePlan is what a compaction does under the session lock: the
// plan and a copy of the folded messages for the strategies.
func BenchmarkMakePlan(b *testing.B) {
	e, s := bigSession(b)
	b.ReportAllocs()
	for b.Loop() {
		p, err := e.makePlan(s, 40000)
		if err != nil {
			require.NoError(b, err)
		}
		p.collect(s)
	}
}

// BenchmarkPlan is Engine.Plan at 10,000 messages: cut, counts and file
// operations, without copying the folded messages. Target: ≤ 200 µs.
func BenchmarkPlan(b *testing.B) {
	e, s := bigSession(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Plan(s, CompactOptions{KeepRecentTokens: 40000}); err != nil {
			require.NoError(b, err)
		}
	}
}

// BenchmarkAppend appends to sessions of different lengths: the cost must
// not grow with the length.
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{100, 10000, 100000} {
		b.Run(fmt.Sprintf("len=%d", n), func(b *testing.B) {
			e, _ := New(Config{ContextWindow: 1 << 30, Tokenizer: "chars"})
			s := e.NewSession()
			m := Message{Role: abi.RoleUser, Content: []Block{{Type: abi.BlockText, Text: "a message of ordinary length, about eighty characters long"}}}
			for range n {
				m.ID = ""
				s.Append(m)
			}
			b.ReportAllocs()
			for b.Loop() {
				m.ID = ""
				if err := s.Append(m); err != nil {
					require.NoError(b, err)
				}
			}
		})
	}
}

// writePruneLog writes a session log of n tool results followed by a prune
// of each: the shape a long agent run leaves when pruning passes shorten
// old results, every prune landing far from the end.
func writePruneLog(b *testing.B, n int) string {
	path := filepath.Join(b.TempDir(), "prunes.jsonl")
	f, err := os.Create(path)
	require.NoError(b, err)
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, `{"type":"message","message":{"id":"m%d","role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","text":"output of step %d, long enough to be worth pruning"}]}}`+"\n", i, i, i)
	}
	for i := range n {
		fmt.Fprintf(w, `{"type":"prune","prune":{"message_id":"m%d","block":0,"text":"[pruned]"}}`+"\n", i)
	}
	require.NoError(b, w.Flush())
	require.NoError(b, f.Close())
	return path
}

// BenchmarkOpenSessionManyPrunes replays logs of n messages and n prunes:
// the time per op must grow linearly with n.
func BenchmarkOpenSessionManyPrunes(b *testing.B) {
	for _, n := range []int{20_000, 50_000, 200_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			path := writePruneLog(b, n)
			e, err := New(Config{ContextWindow: 1 << 30, Tokenizer: "chars"})
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				s, err := e.LoadSession(path)
				require.NoError(b, err)
				require.Equal(b, n, s.Len(), "messages loaded")
			}
		})
	}
}
