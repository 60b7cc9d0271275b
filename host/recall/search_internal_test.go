package recall

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// naive is what Search answers for re, found the plain way: re run over
// every block whole.
func naive(x *Index, re *regexp.Regexp, limit int) []Hit {
	var found []scored
	for d := range x.docs {
		w := x.docBounds(d)
		f := scored{d: d}
		for _, m := range re.FindAllStringIndex(x.text[w[0]:w[1]], -1) {
			if m[1] > m[0] {
				if f.n == 0 {
					f.at = w[0] + m[0]
				}
				f.n++
			}
		}
		if f.n > 0 {
			found = append(found, f)
		}
	}
	slices.SortFunc(found, func(a, b scored) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return b.d - a.d
	})
	hits := []Hit{}
	for _, f := range found[:min(limit, len(found))] {
		hits = append(hits, x.hit(x.docs[f.d].loc, f.n, f.at))
	}
	return hits
}

// Search runs an expression only around the literals its matches hold,
// over the bytes a match can hold; whatever the expression (word
// boundaries, lines, case folding, alternations, newlines, non-ASCII),
// it finds what running it over every block whole finds, also in blocks
// cut in pieces.
func TestSearchFindsWhatTheWholeBlocksHold(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	words := []string{"checkpoint", "Checkpoint", "CHECKPOINT", "saveCheckpoint", "checkpoints", "timed", "out", "is", "full",
		"Error", "error", "ParseError", "io_error(", "x_y(", "café", "naïve", "\u212Aelvin", "kelvin", "ſtop", "stop",
		"foo.bar", "a-b", "resume", "RESUME", "42", "0x1f", "\t", "  ", "(", ")", "[", "]", "\\", "é", "e"}
	var msgs []abi.Message
	for i := range 300 {
		var b strings.Builder
		n := 5 + r.IntN(60)
		if i%100 == 7 {
			n = 15_000 // a block cut in pieces
		}
		for range n {
			b.WriteString(words[r.IntN(len(words))])
			switch r.IntN(8) {
			case 0:
				b.WriteString("\n")
			case 1:
				// no space: words run together
			default:
				b.WriteString(" ")
			}
		}
		msgs = append(msgs, abi.Message{ID: fmt.Sprintf("m%d", i), Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: b.String()}}})
	}
	k, _ := KeyFor(msgs)
	x := New(msgs, k)
	// Exactness, not time: no deadline cuts a search short here.
	defer func(d time.Duration) { scanTime = d }(scanTime)
	scanTime = time.Hour
	for _, q := range []string{
		`\bcheckpoint\w*`, `checkpoint`, `(?i)checkpoint`, `(?i)\bcheckpoint\b`, `\Bcheckpoint`, `checkpoint\B`,
		`\w+Error`, `[a-z]+_[a-z]+\(`, `(timed out|is full)`, `(?s)checkpoint.*resume`, `checkpoint.*resume`,
		`checkpoint\s+\w+`, `checkpoint[^x]{0,20}`, `(?m)^checkpoint`, `(?m)checkpoint$`, `^checkpoint`, `checkpoint$`,
		`\Acheckpoint`, `checkpoint\z`, `(?i)kelvin`, `(?i)stop`, `(?i)STOP\b`, `café\w*`, `\w*ïve`, `[^ ]*Error`,
		`\.bar`, `a-b|x_y`, `(?i)(resume|error)s?`, `\b[A-Z]{4,}\b`, `\d+`, `0x[0-9a-f]+`, `e`, `é+`, `\(\)`,
		`\\\w`, `\[\]`, `(?U)check.+t`, `check(point)+`, `(check)?point`, `\tcheck`, `  \w`,
	} {
		re := regexp.MustCompile(q)
		res, err := x.Search(Query{Text: q, Regexp: true, Limit: MaxHits})
		require.NoError(t, err, q)
		assert.False(t, res.Truncated, q)
		if !assert.Equal(t, naive(x, re, MaxHits), res.Hits, q) {
			want := naive(x, re, MaxHits)
			for i := range want {
				if i < len(res.Hits) && want[i] != res.Hits[i] {
					t.Logf("%d want %+v\ngot %+v", i, want[i], res.Hits[i])
					break
				}
			}
		}
	}
}

// A search that reaches its bound of work says so, and ranks what it
// looked at: the latest blocks.
func TestSearchStopsAtItsBound(t *testing.T) {
	var msgs []abi.Message
	for i := range 400 {
		msgs = append(msgs, abi.Message{ID: fmt.Sprintf("m%d", i), Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: strings.Repeat("ab ", 3_000) + fmt.Sprintf("NUM%d", i)}}})
	}
	defer func(n int, d time.Duration) { scanBytes, scanTime = n, d }(scanBytes, scanTime)
	scanBytes, scanTime = 1<<20, time.Hour
	k, _ := KeyFor(msgs)
	x := New(msgs, k)
	res, err := x.Search(Query{Text: `NUM\d+\b`, Regexp: true, Limit: 5})
	require.NoError(t, err)
	assert.False(t, res.Truncated, "a literal narrows the work")
	assert.Len(t, res.Hits, 5)
	res, err = x.Search(Query{Text: `[A-Z]{3}\d+\b`, Regexp: true, Limit: 5})
	require.NoError(t, err)
	assert.True(t, res.Truncated, "3.6 MB with no literal, over a bound of 1 MB")
	require.Len(t, res.Hits, 5)
	assert.Equal(t, k.SpanRef("m399", "m399"), res.Hits[0].Ref, "the latest first")
}

// An expression that costs much a byte over a large block is bounded: a
// block is cut in pieces between which the deadline is checked, and a
// piece that cannot be cut and would cost too much is not run.
func TestHostileExpressionsAreBounded(t *testing.T) {
	index := func(texts ...string) *Index {
		var msgs []abi.Message
		for i, text := range texts {
			msgs = append(msgs, abi.Message{ID: fmt.Sprintf("m%d", i), Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: text}}})
		}
		k, _ := KeyFor(msgs)
		return New(msgs, k)
	}
	defer func(d time.Duration) { scanTime = d }(scanTime)
	scanTime = time.Hour

	x := index("hello", strings.Repeat("x", 2<<20))
	res, err := x.Search(Query{Text: `\w{1000}`, Regexp: true})
	require.NoError(t, err)
	assert.True(t, res.Truncated, "2 MB of one word times a program of 1,000 instructions is not run")
	assert.Empty(t, res.Hits)
	res, err = x.Search(Query{Text: `hello`, Regexp: true})
	require.NoError(t, err)
	assert.False(t, res.Truncated, "a literal that is rare runs over little")
	assert.Len(t, res.Hits, 1)

	// 2 MB of words in one block: 30 pieces of 64 KB, each well over
	// the deadline's millisecond.
	scanTime = time.Millisecond
	res, err = index(strings.Repeat("abcdefgh ", 230_000)).Search(Query{Text: `\w{300}\d`, Regexp: true})
	require.NoError(t, err)
	assert.True(t, res.Truncated, "the deadline is checked between the pieces of one block")
}
