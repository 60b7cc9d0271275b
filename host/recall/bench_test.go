package recall_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/cputime"
	"github.com/compact-host/compact-host/host/recall"
)

// longSession is a coding session of n messages, about 1.3 KB each
// (13 MB at 10,000): replies with tool calls and their outputs, in words
// drawn as natural text draws them (Zipf over a vocabulary of 5,000), with
// the phrases the benchmarks look for here and there.
func longSession(n int) []abi.Message {
	r := rand.New(rand.NewPCG(1, 2))
	const letters = "etaoinshrdlcumwfgypbvkjxqz_"
	vocab := make([]string, 5000)
	for i := range vocab {
		w := make([]byte, 2+r.IntN(9))
		for j := range w {
			w[j] = letters[min(len(letters)-1, int(r.ExpFloat64()*6))]
		}
		vocab[i] = string(w)
	}
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(vocab)-1))
	phrases := []string{"func saveCheckpoint(ctx context.Context) error {", "the checkpoint store is full", "proxy request handler timed out after 30s", "FAIL TestCheckpointResume (0.42s)"}
	text := func(size int) string {
		var b strings.Builder
		for b.Len() < size {
			if r.IntN(400) == 0 {
				b.WriteString(phrases[r.IntN(len(phrases))])
			} else {
				b.WriteString(vocab[zipf.Uint64()])
			}
			if r.IntN(12) == 0 {
				b.WriteString("\n")
			} else {
				b.WriteString(" ")
			}
		}
		return b.String()
	}
	msgs := []abi.Message{{ID: "m0", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "make the tests pass"}}}}
	for i := 1; len(msgs) < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			abi.Message{ID: fmt.Sprintf("a%d", i), Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: text(200)}, {Type: abi.BlockToolUse, ID: id, Name: "Bash", Input: []byte(`{"command":"go test ./..."}`)}}},
			abi.Message{ID: fmt.Sprintf("r%d", i), Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: id, Text: text(2200)}}},
		)
	}
	return msgs[:n]
}

var benchIndex = func() func(b *testing.B) (*recall.Index, recall.Key) {
	var x *recall.Index
	var k recall.Key
	return func(b *testing.B) (*recall.Index, recall.Key) {
		if x == nil {
			msgs := longSession(10_000)
			k, _ = recall.KeyFor(msgs)
			x = recall.New(msgs, k)
		}
		return x, k
	}
}()

// Search over the originals of a 10,000-message session (13 MB).
func BenchmarkSearch(b *testing.B) {
	x, _ := benchIndex(b)
	for _, q := range []recall.Query{
		{Text: "checkpoint store"},
		{Text: `func \w+Checkpoint\(`, Regexp: true},
		{Text: `proxy (request|response) handler`, Regexp: true},
		{Text: `\bcheckpoint\w*`, Regexp: true},
		{Text: `\w+Error`, Regexp: true},
		{Text: `(timed out|is full)`, Regexp: true},
		{Text: `(?s)checkpoint.*resume`, Regexp: true},
		{Text: `\b[A-Z]{4,}\b`, Regexp: true},
		{Text: `[a-z]+_[a-z]+\(`, Regexp: true},
	} {
		b.Run(q.Text, func(b *testing.B) {
			timed(b, func() {
				if _, err := x.Search(q); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// Recall of one tool output and of a span of ten messages, from the
// index of a 10,000-message session.
func BenchmarkRecall(b *testing.B) {
	x, k := benchIndex(b)
	b.Run("tool_output", func(b *testing.B) {
		ref := k.ToolRef("call_2500")
		timed(b, func() {
			if _, err := x.Recall(ref, 1); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("span", func(b *testing.B) {
		ref := k.SpanRef("a2500", "r2504")
		timed(b, func() {
			if _, err := x.Recall(ref, 1); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkIndex is the cost of reading a 10,000-message session into an
// index, paid once per change of the session.
func BenchmarkIndex(b *testing.B) {
	msgs := longSession(10_000)
	k, _ := recall.KeyFor(msgs)
	b.ResetTimer()
	for b.Loop() {
		recall.New(msgs, k)
	}
}

// timed runs op b.N times and reports the median wall time of one op
// (p50-ns/op) and the process's CPU time per op (cpu-ns/op): on a loaded
// machine the wall time counts the wait for a core, the CPU time does not.
func timed(b *testing.B, op func()) {
	b.Helper()
	walls := make([]time.Duration, 0, b.N)
	cpu0 := cputime.Process()
	for b.Loop() {
		t0 := time.Now()
		op()
		walls = append(walls, time.Since(t0))
	}
	cpu := cputime.Process() - cpu0
	slices.Sort(walls)
	b.ReportMetric(float64(walls[len(walls)/2].Nanoseconds()), "p50-ns/op")
	if cpu0 >= 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(len(walls)), "cpu-ns/op")
	}
}
