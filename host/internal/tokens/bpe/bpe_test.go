package bpe

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tiktoken-go/tokenizer"

	"github.com/compact-host/compact-host/host/internal/cputime"
	"github.com/compact-host/compact-host/host/internal/tokens/bpe/internal/vocab"
)

// reference holds what an encoding is checked against: tiktoken-go's
// codec; the matcher regexp2cg generated for the pattern, which the codec
// runs (regexp2 registers it under the pattern's text); and regexp2's
// interpreter, which a pattern of another text gets. The two matchers
// differ on DEL and on some runs of spaces (see split.go), where the
// interpreter is right, so the split must equal the interpreter's, and
// the count must equal the codec's on every text the generated matcher
// splits alike, and on every piece it splits alike in the others.
type reference struct {
	enc         *Encoding
	codec       tokenizer.Codec
	generated   *regexp2.Regexp
	interpreted *regexp2.Regexp
}

// The patterns tiktoken-go compiles (codec/o200k_base.go, cl100k_base.go).
const (
	o200kPattern  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

func references(tb testing.TB) []reference {
	tb.Helper()
	var refs []reference
	for _, r := range []struct {
		enc     *Encoding
		name    tokenizer.Encoding
		pattern string
	}{{O200k(), tokenizer.O200kBase, o200kPattern}, {Cl100k(), tokenizer.Cl100kBase, cl100kPattern}} {
		codec, err := tokenizer.Get(r.name)
		require.NoError(tb, err)
		refs = append(refs, reference{
			enc:         r.enc,
			codec:       codec,
			generated:   regexp2.MustCompile(r.pattern, regexp2.None),
			interpreted: regexp2.MustCompile(`(?:)`+r.pattern, regexp2.None),
		})
	}
	return refs
}

func matches(tb testing.TB, re *regexp2.Regexp, s string) []string {
	var out []string
	m, err := re.FindStringMatch(s)
	for ; err == nil && m != nil; m, err = re.FindNextMatch(m) {
		out = append(out, m.String())
	}
	require.NoError(tb, err)
	return out
}

func pieces(e *Encoding, s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := e.split(s, i)
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// check compares the split and the counts of s with the references: the
// count of the text where tiktoken-go splits it alike, else the count of
// each piece it splits alike. It returns the number of pieces whose count
// tiktoken-go cannot give.
func (r reference) check(t *testing.T, s string) (unchecked int) {
	t.Helper()
	want := matches(t, r.interpreted, s)
	if !assert.Equal(t, want, pieces(r.enc, s), "%s split of %q", r.enc.Name(), s) {
		return 0
	}
	if slices.Equal(want, matches(t, r.generated, s)) {
		n, err := r.codec.Count(s)
		require.NoError(t, err)
		assert.Equal(t, n, r.enc.Count(s), "%s count of %q", r.enc.Name(), s)
		return 0
	}
	v := r.enc.load()
	for _, p := range want {
		if m := matches(t, r.generated, p); len(m) != 1 || m[0] != p {
			unchecked++
			continue
		}
		n, err := r.codec.Count(p)
		require.NoError(t, err)
		assert.Equal(t, n, v.pieceCount(p), "%s count of piece %q", r.enc.Name(), p)
	}
	return unchecked
}

// tokens returns the tokens of e in rank order.
func tokens(e *Encoding) []string {
	var toks []string
	for i := 0; i < len(e.data); i += 1 + int(e.data[i]) {
		toks = append(toks, e.data[i+1:i+1+int(e.data[i])])
	}
	return toks
}

// The committed vocabularies are what the generator writes, and every
// token is found at its rank.
func TestVocabularyIsGenerated(t *testing.T) {
	files := map[string]string{"o200k_base.tok": o200kData, "cl100k_base.tok": cl100kData}
	for _, e := range vocab.Encodings {
		want, err := vocab.Build(e.Name)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, []byte(files[e.File])), "%s differs from the generator's output: run go generate ./host/internal/tokens/bpe", e.File)
	}
	for _, r := range references(t) {
		v := r.enc.load()
		for rank, tok := range tokens(r.enc) {
			if got := v.rank(tok); got != uint32(rank) {
				t.Fatalf("%s: token %q has rank %d, found %d", r.enc.Name(), tok, rank, got)
			}
			ids, _, err := r.codec.Encode(tok)
			if err == nil && len(ids) == 1 && ids[0] != uint(rank) {
				t.Fatalf("%s: token %q is rank %d in tiktoken-go, %d here", r.enc.Name(), tok, ids[0], rank)
			}
		}
		assert.Equal(t, noRank, v.rank("not a token at all, this"))
	}
}

var seeds = []string{
	"", "hello world", "Hello, World! It's 42.", "don't DON'T we'LL they'Re I'M you'VE he'D",
	"'s's 'S 'ſ 'ſx 'l 'll 'lL 're 'rx", "x'ſ", "ſ", "ABCdef GHI jKL", "ǅungla ǅ Ǆ",
	"  \n\n  \t \r\n  x", "   ", " ", "a  b", "a \u3000b", "\u3000\u3000x", "x \u00a0\u00a0y", "\u0085\u2028\u2029",
	"123456789 1,234.5 ١٢٣٤ ⅧⅫ ½²", "foo/bar//baz\n/qux\r\n//", "}\n/", " !!!\n\n", "a\u0301 \u0301\u0301 x\u0301y",
	"\u0301", "'\u0301", " \u0301a", "ʰʰA", "日本語のテキスト、句読点。", "한국어 텍스트", "emoji 😀😀 👍🏽 🇫🇷",
	"bad \xff\xfe bytes \xe2\x82", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80", "<|endoftext|> <|endofprompt|>",
	strings.Repeat(" ", 300) + "x", strings.Repeat("a", 500), strings.Repeat("ab", 200) + "!",
	"func main() { fmt.Println(\"hello, world\") } // comment\n",
}

func TestSplitAndCountMatchTiktoken(t *testing.T) {
	for _, r := range references(t) {
		for _, s := range seeds {
			r.check(t, s)
		}
	}
}

// skipLong skips the comparisons over all of Unicode and the corpus in
// -short runs and under the race detector: they run on one goroutine,
// and the detector takes them from seconds to minutes. Otherwise they
// run in parallel with each other: they only read the encodings.
func skipLong(t *testing.T) {
	t.Helper()
	if testing.Short() || raceEnabled {
		t.Skip("long differential test: skipped with -short and -race")
	}
	t.Parallel()
}

// Every character has the classes regexp2 gives it: each class pattern
// is matched against all of Unicode, in runs.
func TestRuneClasses(t *testing.T) {
	skipLong(t)
	var b strings.Builder
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if utf8.ValidRune(r) {
			b.WriteRune(r)
		}
	}
	all := b.String()
	for _, c := range []struct {
		bit     uint8
		pattern string
	}{
		{cL, `\p{L}`}, {cN, `\p{N}`}, {cS, `\s`}, {cNL, `[\r\n]`},
		{cUpper, `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`}, {cLower, `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`},
	} {
		in := map[rune]bool{}
		for _, m := range matches(t, regexp2.MustCompile(c.pattern+"+", regexp2.None), all) {
			for _, r := range m {
				in[r] = true
			}
		}
		for _, r := range all {
			if got := runeClass(r)&c.bit != 0; got != in[r] {
				t.Fatalf("%U in %s: %v here, %v in regexp2", r, c.pattern, got, in[r])
			}
		}
	}
}

// Every character splits as regexp2's interpreter splits it, between
// letters and between a space and a newline.
func TestEveryRune(t *testing.T) {
	skipLong(t)
	refs := references(t)
	var b strings.Builder
	for r := rune(0); r <= utf8.MaxRune+1; r++ {
		if b.Len() >= 1<<16 || r > utf8.MaxRune {
			text := b.String()
			for _, ref := range refs {
				if !samePieces(t, ref.enc.Name(), matches(t, ref.interpreted, text), pieces(ref.enc, text)) {
					return
				}
			}
			b.Reset()
		}
		if utf8.ValidRune(r) {
			c := string(r)
			b.WriteString("a" + c + "b " + c + "\n")
		}
	}
}

// samePieces reports the first piece that differs (a whole diff of a
// million pieces is unreadable).
func samePieces(t *testing.T, name string, want, got []string) bool {
	t.Helper()
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			t.Errorf("%s: piece %d: want %q, got %q", name, i, want[i], got[i])
			return false
		}
	}
	return assert.Equal(t, len(want), len(got), "%s: pieces", name)
}

// The first counts, from several goroutines at once, build the table
// once and agree.
func TestConcurrentFirstUse(t *testing.T) {
	e := &Encoding{name: o200k.name, data: o200k.data, split: o200k.split}
	text := strings.Join(seeds, " ")
	counts := make([]int, 4)
	var wg sync.WaitGroup
	for i := range counts {
		wg.Go(func() { counts[i] = e.Count(text) })
	}
	wg.Wait()
	for _, n := range counts {
		assert.Equal(t, O200k().Count(text), n)
	}
}

// The long-piece merge is the short-piece merge in O(n log n).
func TestMergeHeapMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, r := range references(t) {
		v := r.enc.load()
		toks := tokens(r.enc)
		for range 3000 {
			var b strings.Builder
			for b.Len() < 2+rng.IntN(scanMax-2) {
				switch rng.IntN(3) {
				case 0:
					b.WriteString(toks[rng.IntN(len(toks))])
				case 1:
					b.WriteByte(byte(rng.IntN(256)))
				default:
					b.WriteString("ab c")
				}
			}
			p := b.String()[:min(b.Len(), scanMax)]
			require.Equal(t, v.mergeScan(p), v.mergeHeap(p), "%s: %q", r.enc.Name(), p)
		}
	}
}

// corpusTexts returns every string of the shared corpus sessions
// (../shared/corpus above the module root), skipping when it is absent.
func corpusTexts(tb testing.TB) []string {
	tb.Helper()
	dir, err := os.Getwd()
	require.NoError(tb, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			tb.Skip("no module root above the test")
		}
		dir = filepath.Dir(dir)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "..", "shared", "corpus", "*"))
	if len(files) == 0 {
		tb.Skip("../shared/corpus not found above the module root; skipping")
	}
	var texts []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			texts = append(texts, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				texts = append(texts, k)
				walk(v[k])
			}
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(tb, err)
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			var v any
			if err := dec.Decode(&v); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				tb.Fatalf("%s: %v", f, err)
			}
			walk(v)
		}
	}
	return texts
}

func TestCorpusMatchesTiktoken(t *testing.T) {
	skipLong(t)
	texts := corpusTexts(t)
	total := 0
	for _, s := range texts {
		total += len(s)
	}
	for _, r := range references(t) {
		unchecked, ours, theirs := 0, 0, 0
		for _, s := range texts {
			unchecked += r.check(t, s)
			if t.Failed() {
				return
			}
			n, _ := r.codec.Count(s)
			ours, theirs = ours+r.enc.Count(s), theirs+n
		}
		t.Logf("%s: %d texts, %d bytes, %d tokens (tiktoken-go: %d); %d pieces tiktoken-go splits otherwise",
			r.enc.Name(), len(texts), total, ours, theirs, unchecked)
	}
}

func FuzzCount(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	refs := references(f)
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range refs {
			r.check(t, s)
		}
	})
}

// BenchmarkCount counts every fourth string of the corpus (about 2 MB),
// here and with tiktoken-go, in one run.
func BenchmarkCount(b *testing.B) {
	texts := corpusTexts(b)
	var sample []string
	size := 0
	for i := 0; i < len(texts); i += 4 {
		sample = append(sample, texts[i])
		size += len(texts[i])
	}
	for _, r := range references(b) {
		r.enc.Count("warm up")
		_, _ = r.codec.Count("warm up")
		b.Run(r.enc.Name()+"/bpe", func(b *testing.B) {
			reportCPU(b, size, func() {
				for _, s := range sample {
					r.enc.Count(s)
				}
			})
		})
		b.Run(r.enc.Name()+"/tiktoken-go", func(b *testing.B) {
			reportCPU(b, size, func() {
				for _, s := range sample {
					_, _ = r.codec.Count(s)
				}
			})
		})
	}
}

// BenchmarkLoad builds the lookup table of o200k_base, the work of the
// first count.
// reportCPU runs f b.N times and reports, beside the wall clock, its CPU
// time per op and the throughput that gives for size bytes per op.
func reportCPU(b *testing.B, size int, f func()) {
	b.ReportAllocs()
	if size > 0 {
		b.SetBytes(int64(size))
	}
	start := cputime.Process()
	for b.Loop() {
		f()
	}
	cpu := cputime.Process() - start
	if start < 0 || cpu <= 0 {
		return
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	if size > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/cpu.Seconds()/1e6, "MB/cpu-s")
	}
}

func BenchmarkLoad(b *testing.B) {
	reportCPU(b, 0, func() {
		e := &Encoding{name: o200k.name, data: o200k.data, split: o200k.split}
		e.Count("x")
	})
}
