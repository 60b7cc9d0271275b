package digest

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomDoc builds a document with parts of both kinds of item, headers
// shared by runs of items, empty parts and omission notes.
func randomDoc(r *rand.Rand, prose bool) *Doc {
	d := &Doc{Preamble: "_note_", Prose: prose}
	if r.Intn(2) == 0 {
		d.Trailer = "trailer"
	}
	for p := 0; p < 1+r.Intn(5); p++ {
		part := Part{Title: fmt.Sprintf("Part %d", p), Omitted: "(%d left out.)"}
		if r.Intn(3) == 0 {
			part.Empty = "None."
		}
		for i := 0; i < r.Intn(30); i++ {
			it := Item{Text: strings.Repeat("x", 1+r.Intn(80)), Keep: r.Intn(4)}
			if r.Intn(5) == 0 {
				it.Keep = Never
			}
			if r.Intn(2) == 0 {
				it.Header = fmt.Sprintf("H%d:", r.Intn(2))
			}
			if r.Intn(3) == 0 {
				it.Short, it.Trim = strings.Repeat("s", 1+r.Intn(10)), r.Intn(4)
			}
			part.Items = append(part.Items, it)
		}
		d.Parts = append(d.Parts, part)
	}
	return d
}

func TestSizeIsRenderedLength(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for n := 0; n < 500; n++ {
		d := randomDoc(r, n%2 == 0)
		mask := make([][]uint8, len(d.Parts))
		for p := range d.Parts {
			mask[p] = make([]uint8, len(d.Parts[p].Items))
			for i := range mask[p] {
				mask[p][i] = uint8(r.Intn(3))
			}
		}
		want := d.size(mask)
		// Shorten and drop the marked items for real, as Fit does, and
		// render.
		for p := range d.Parts {
			part := &d.Parts[p]
			kept := part.Items[:0]
			for i, it := range part.Items {
				switch mask[p][i] {
				case left:
					part.dropped++
				case short:
					if it.Short != "" {
						it.Text = it.Short
					}
					kept = append(kept, it)
				default:
					kept = append(kept, it)
				}
			}
			part.Items = kept
		}
		require.Equal(t, want, len(d.Render()), "doc %d (prose %v)", n, d.Prose)
	}
}

func TestFitMeetsTargetRenderingOnce(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for n := 0; n < 300; n++ {
		d := randomDoc(r, n%2 == 1)
		target := 20 + r.Intn(400)
		never := 0
		for _, p := range d.Parts {
			for _, it := range p.Items {
				if it.Keep == Never {
					never++
				}
			}
		}
		d.Fit(target)
		got := EstimateTokens(d.Render())
		left := 0
		for _, p := range d.Parts {
			for _, it := range p.Items {
				if it.Keep != Never {
					left++
				}
			}
		}
		long := 0
		for _, p := range d.Parts {
			for _, it := range p.Items {
				if it.Short != "" {
					long++
				}
			}
		}
		if left > 0 || long > 0 {
			assert.LessOrEqual(t, got, target, "doc %d: over target with droppable or shortenable items left", n)
		}
		kept := 0
		for _, p := range d.Parts {
			for _, it := range p.Items {
				if it.Keep == Never {
					kept++
				}
			}
		}
		assert.Equal(t, never, kept, "doc %d: an item kept at Never was dropped", n)
	}
}

// Room is the target while the items never dropped leave room, and
// grows by two fifths of the target (to 1.8 times it at most) once they
// take more than three fifths of it.
func TestRoom(t *testing.T) {
	doc := func(fixedBytes int) *Doc {
		return &Doc{Parts: []Part{{Title: "T", Items: []Item{
			{Text: strings.Repeat("r", fixedBytes), Keep: Never},
			{Text: strings.Repeat("d", 4000), Keep: 1},
		}}}}
	}
	assert.Equal(t, 1000, doc(2000).Room(1000))
	got := doc(3200).Room(1000)
	assert.Greater(t, got, 800+400-10)
	assert.LessOrEqual(t, got, 800+400+10)
	assert.Equal(t, 1800, doc(8000).Room(1000))
	assert.Equal(t, 0, doc(8000).Room(0))
}

// An item with a short form gives up its detail at its Trim priority,
// before items of higher priority are dropped, and keeps its short form
// when it is never dropped.
func TestFitShortensBeforeDropping(t *testing.T) {
	d := &Doc{Parts: []Part{{Title: "T", Omitted: "(%d left out.)", Items: []Item{
		{Text: "- `a.go`: " + strings.Repeat("detail ", 60), Short: "- `a.go`", Trim: 1, Keep: Never},
		{Text: "low " + strings.Repeat("l", 200), Keep: 0},
		{Text: "high " + strings.Repeat("h", 200), Keep: 3},
	}}}}
	d.Fit(80)
	out := d.Render()
	assert.Contains(t, out, "- `a.go`\n")
	assert.NotContains(t, out, "detail")
	assert.Contains(t, out, "high ")
	assert.NotContains(t, out, "low ")
	assert.Contains(t, out, "(1 left out.)")
}

// A late, large shortening frees room that the items dropped before it
// take back: the request cut to its head leaves room for the narrative.
func TestFitTakesBackWhatFitsAgain(t *testing.T) {
	d := &Doc{Parts: []Part{{Title: "T", Omitted: "(%d left out.)", Items: []Item{
		{Text: "> " + strings.Repeat("request ", 100), Short: "> request head", Trim: 5, Keep: Never},
		{Text: "narrative " + strings.Repeat("n", 60), Keep: 1},
		{Text: "finding " + strings.Repeat("f", 60), Keep: 3},
		{Text: "decision " + strings.Repeat("d", 60), Keep: 6},
	}}}}
	d.Fit(80)
	out := d.Render()
	assert.LessOrEqual(t, EstimateTokens(out), 80)
	assert.Contains(t, out, "> request head")
	for _, s := range []string{"narrative ", "finding ", "decision "} {
		assert.Contains(t, out, s)
	}
	assert.NotContains(t, out, "left out.")
}

func TestDedupeDropsAQuotedStatement(t *testing.T) {
	said := "Now update the bead to reflect the simplified design, then push to the same PR."
	d := &Doc{Parts: []Part{
		{Title: "Next Step", Items: []Item{{Text: "- The assistant said it would next: “" + said + "”", Keep: Never}}},
		{Title: "Narrative", Items: []Item{
			{Text: "- " + said, Keep: 3},
			// Short: a name, not a statement, so it stays.
			{Text: "- the simplified design", Keep: 3},
			// Quoted only by an item Fit gives up sooner: it stays.
			{Text: "- Decided: keep the union merge driver for the tags overlay.", Keep: 9},
			{Text: "Last said: “Decided: keep the union merge driver for the tags overlay.”", Keep: 1},
		}},
	}}
	d.Dedupe()
	require.Len(t, d.Parts[0].Items, 1)
	var texts []string
	for _, it := range d.Parts[1].Items {
		texts = append(texts, it.Text)
	}
	assert.Equal(t, []string{
		"- the simplified design",
		"- Decided: keep the union merge driver for the tags overlay.",
		"Last said: “Decided: keep the union merge driver for the tags overlay.”",
	}, texts)
}
