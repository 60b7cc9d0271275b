package recall_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/recall"
)

// conversation makes n turns of a request, a tool call and its output;
// the output of turn i says "needle-i" once, and every fifth is large.
func conversation(opening string, n int) []abi.Message {
	msgs := []abi.Message{{ID: "u0", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: opening}}}}
	for i := range n {
		out := fmt.Sprintf("output of turn %d: needle-%d found\n", i, i)
		if i%5 == 0 {
			out += strings.Repeat(fmt.Sprintf("line of turn %d\n", i), 200)
		}
		msgs = append(msgs,
			abi.Message{ID: fmt.Sprintf("a%d", i), Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "Looking."}, {Type: abi.BlockToolUse, ID: fmt.Sprintf("call_%d", i), Name: "Bash", Input: []byte(`{"command":"go test ./..."}`)}}},
			abi.Message{ID: fmt.Sprintf("r%d", i), Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: fmt.Sprintf("call_%d", i), Text: out}}},
		)
	}
	return msgs
}

func index(t testing.TB, msgs []abi.Message) (*recall.Index, recall.Key) {
	t.Helper()
	k, ok := recall.KeyFor(msgs)
	require.True(t, ok)
	return recall.New(msgs, k), k
}

func TestMarkersAreStableAndBounded(t *testing.T) {
	msgs := conversation("fix the build", 100)
	k1, _ := recall.KeyFor(msgs)
	k2, _ := recall.KeyFor(conversation("fix the build", 3))
	assert.Equal(t, k1.Markers(msgs[1:40]), k2.Markers(msgs[1:40]), "the same conversation gave other markers")
	ms := k1.Markers(msgs[1:])
	require.Equal(t, abi.MarkerSpan, ms[0].Kind)
	assert.Len(t, ms, 1+recall.MaxToolMarkers, "20 large outputs, at most 12 marked")
	for _, m := range ms[1:] {
		assert.Equal(t, "Bash", m.ToolName)
		assert.GreaterOrEqual(t, m.Bytes, recall.MinToolOutputBytes)
		assert.True(t, abi.ValidRef(m.Ref), m.Ref)
	}
	other, _ := recall.KeyFor(conversation("another task", 3))
	assert.NotEqual(t, k1.Markers(msgs[1:40]), other.Markers(msgs[1:40]), "another conversation derives the same markers")
}

func TestRecallSpanAndToolOutput(t *testing.T) {
	msgs := conversation("fix the build", 30)
	x, k := index(t, msgs)
	p, err := x.Recall(k.SpanRef("a3", "r4"), 1)
	require.NoError(t, err)
	assert.Equal(t, 1, p.Pages)
	assert.Contains(t, p.Text, "needle-3 found")
	assert.Contains(t, p.Text, "needle-4 found")
	assert.NotContains(t, p.Text, "needle-5 ")
	assert.NotContains(t, p.Text, "needle-2 ")

	p, err = x.Recall(k.ToolRef("call_7"), 1)
	require.NoError(t, err)
	assert.Contains(t, p.Text, "[tool call Bash call_7]")
	assert.Contains(t, p.Text, "needle-7 found")

	_, err = x.Recall(k.SpanRef("r4", "a3"), 1)
	assert.ErrorIs(t, err, recall.ErrUnknownRef, "a span that ends before it starts")
}

// Another conversation's markers, or another tenant's (a store keeps each
// tenant's conversations apart, and their keys differ), name nothing
// here, and a reference that is not a marker (a path, a traversal) is
// refused before any lookup. No error names what exists.
func TestForeignAndHostileReferences(t *testing.T) {
	x, _ := index(t, conversation("fix the build", 30))
	other, _ := recall.KeyFor(conversation("leak the keys", 30))
	for _, ref := range []string{other.ToolRef("call_7"), other.SpanRef("a3", "r4"), "t-0000000000000000", "s-00000000000000000000"} {
		_, err := x.Recall(ref, 1)
		require.ErrorIs(t, err, recall.ErrUnknownRef, ref)
		assert.NotContains(t, err.Error(), "needle")
	}
	for _, ref := range []string{"../../etc/passwd", "t-../../x", "s-%2e%2e", "/etc/passwd", "t-" + strings.Repeat("a", 5000), "", "call_7", "T-ABC"} {
		_, err := x.Recall(ref, 1)
		require.ErrorIs(t, err, recall.ErrBadRef, "%.40q", ref)
	}
	_, err := x.Recall(recall.Key{}.ToolRef("call_1"), 1)
	require.ErrorIs(t, err, recall.ErrUnknownRef)
}

// A huge original comes in bounded pages, and past MaxPages it is named,
// not shown.
func TestHugeOriginalsArePagedAndCapped(t *testing.T) {
	huge := strings.Repeat("é0123456789abcdef", (recall.MaxPages+10)*recall.PageBytes/18)
	msgs := []abi.Message{
		{ID: "u0", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "dump it"}}},
		{ID: "a0", Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, ID: "c", Name: "Bash"}}},
		{ID: "r0", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "c", Text: huge}}},
	}
	x, k := index(t, msgs)
	ref := k.ToolRef("c")
	p, err := x.Recall(ref, 1)
	require.NoError(t, err)
	assert.Equal(t, recall.MaxPages, p.Pages)
	assert.True(t, p.Truncated)
	assert.LessOrEqual(t, len(p.Text), recall.PageBytes+200)
	assert.Contains(t, p.Text, "ask for page 2")
	total := 0
	for i := 1; i <= p.Pages; i++ {
		pg, err := x.Recall(ref, i)
		require.NoError(t, err)
		require.True(t, strings.ToValidUTF8(pg.Text, "?") == pg.Text, "page %d splits a rune", i)
		total += len(pg.Text)
	}
	assert.Less(t, total, (recall.MaxPages+1)*(recall.PageBytes+300))
	last, _ := x.Recall(ref, recall.MaxPages)
	assert.Contains(t, last.Text, "more bytes, past the last page")
	for _, page := range []int{0, -1, recall.MaxPages + 1} {
		_, err = x.Recall(ref, page)
		assert.ErrorIs(t, err, recall.ErrPage)
	}
	res, err := x.Search(recall.Query{Text: "0123"})
	require.NoError(t, err)
	require.Len(t, res.Hits, 1)
	assert.Less(t, len(res.Hits[0].Snippet), 300, "a snippet is bounded")
}

func TestSearch(t *testing.T) {
	x, k := index(t, conversation("fix the build", 30))
	res, err := x.Search(recall.Query{Text: "NEEDLE-17 "})
	require.NoError(t, err)
	require.Len(t, res.Hits, 1)
	assert.Equal(t, k.ToolRef("call_17"), res.Hits[0].Ref)
	assert.Equal(t, "Bash", res.Hits[0].Tool)
	assert.Contains(t, res.Hits[0].Snippet, "needle-17 found")
	p, err := x.Recall(res.Hits[0].Ref, 1)
	require.NoError(t, err)
	assert.Contains(t, p.Text, "needle-17 found")

	res, err = x.Search(recall.Query{Text: `line of turn (10|2\d)\b`, Regexp: true, Limit: 3})
	require.NoError(t, err)
	require.Len(t, res.Hits, 3)
	for _, h := range res.Hits {
		assert.Equal(t, 200, h.Matches)
	}
	assert.Equal(t, k.ToolRef("call_25"), res.Hits[0].Ref, "equal counts rank the latest first")

	// With a literal every match holds (prefiltered) and without one
	// (the whole text), the same blocks match.
	for _, q := range []string{`\bneedle-1\d\b found`, `\bneedle-1\d\b`, `(?i)\bNEEDLE-1\d\b`} {
		res, err = x.Search(recall.Query{Text: q, Regexp: true, Limit: 50})
		require.NoError(t, err)
		assert.Len(t, res.Hits, 10, q)
	}

	res, err = x.Search(recall.Query{Text: "Looking", Limit: 1000})
	require.NoError(t, err)
	assert.Len(t, res.Hits, 30)
	p, err = x.Recall(res.Hits[0].Ref, 1)
	require.NoError(t, err)
	assert.Contains(t, p.Text, "--- assistant (a29)")

	for _, q := range []recall.Query{{Text: ""}, {Text: "  "}, {Text: strings.Repeat("x", recall.MaxQueryBytes+1)}, {Text: "(unclosed", Regexp: true}} {
		_, err := x.Search(q)
		assert.ErrorIs(t, err, recall.ErrQuery, "%.20q", q.Text)
	}
}

// An agent whose file it compacted itself resumes from its summary: the
// markers of a compaction of that context are keyed by the summary, and
// resolve in the whole history with KeysFor.
func TestKeysForAFileTheAgentCompacted(t *testing.T) {
	history := conversation("fix the build", 10)
	summary := abi.Message{ID: "sum", Role: abi.RoleUser, Summary: true, Content: []abi.Block{{Type: abi.BlockText, Text: "This session is being continued from a previous conversation. …"}}}
	live := append([]abi.Message{summary}, history[15:]...)
	kLive, _ := recall.KeyFor(live)
	x := recall.New(history, recall.KeysFor(history, live)...)
	p, err := x.Recall(kLive.ToolRef("call_8"), 1)
	require.NoError(t, err)
	assert.Contains(t, p.Text, "needle-8 found")
	p, err = x.Recall(kLive.SpanRef("a1", "r2"), 1)
	require.NoError(t, err)
	assert.Contains(t, p.Text, "needle-2 found")
}

func TestConcurrentCalls(t *testing.T) {
	x, k := index(t, conversation("fix the build", 200))
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				n := (g*50 + i) % 200
				p, err := x.Recall(k.ToolRef(fmt.Sprintf("call_%d", n)), 1)
				if assert.NoError(t, err) {
					assert.Contains(t, p.Text, fmt.Sprintf("needle-%d found", n))
				}
				res, err := x.Search(recall.Query{Text: fmt.Sprintf("needle-%d found", n)})
				if assert.NoError(t, err) && assert.Len(t, res.Hits, 1) {
					assert.Equal(t, k.ToolRef(fmt.Sprintf("call_%d", n)), res.Hits[0].Ref)
				}
			}
		})
	}
	wg.Wait()
}
