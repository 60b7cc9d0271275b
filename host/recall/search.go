package recall

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds of one Search's work, so that no query (a regular expression
// that runs over the whole text, or a hostile one) takes long however
// large the conversation: past either, Search returns the hits of the
// blocks it looked at, latest first, with Result.Truncated set.
const (
	// MaxScanBytes bounds the text one regular expression runs over.
	MaxScanBytes = 32 << 20
	// SearchTimeout bounds one Search's time.
	SearchTimeout = 500 * time.Millisecond
	// maxMatches bounds the matches one Search counts, so that a query
	// that matches everywhere ("e") costs a bounded amount.
	maxMatches = 100_000
)

// scanBytes and scanTime are the bounds Search applies: MaxScanBytes and
// SearchTimeout, lowered by tests.
var (
	scanBytes = MaxScanBytes
	scanTime  = SearchTimeout
)

// Query is one Search.
type Query struct {
	// Text is a substring (case-insensitive) or, with Regexp, an RE2
	// regular expression matched against each block of text on its own
	// (^ and $ are the block's start and end; with (?m), its lines'); at
	// most MaxQueryBytes.
	Text   string `json:"query"`
	Regexp bool   `json:"regexp,omitempty"`
	// Limit bounds the hits, DefaultHits when 0, at most MaxHits.
	Limit int `json:"limit,omitempty"`
}

// Hit is one place a query matched.
type Hit struct {
	// Ref is the marker to recall: the tool output, or the message.
	Ref     string `json:"ref"`
	Role    string `json:"role"`
	Tool    string `json:"tool,omitempty"`
	Matches int    `json:"matches"`
	Snippet string `json:"snippet"`
}

// Result is the answer of a Search.
type Result struct {
	// Hits are the blocks that matched, best first: the most matches,
	// and among equals the latest.
	Hits []Hit `json:"hits"`
	// Truncated is true when the search stopped at a bound of its work
	// (MaxScanBytes, SearchTimeout, or 100,000 matches) before it had
	// looked at every block: Hits rank the blocks it looked at, which are
	// the latest.
	Truncated bool `json:"truncated,omitempty"`
}

// Search finds q in the originals.
func (x *Index) Search(q Query) (Result, error) {
	switch {
	case strings.TrimSpace(q.Text) == "":
		return Result{}, fmt.Errorf("%w: the query is empty", ErrQuery)
	case len(q.Text) > MaxQueryBytes:
		return Result{}, fmt.Errorf("%w: the query has %d bytes, over the limit of %d", ErrQuery, len(q.Text), MaxQueryBytes)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultHits
	}
	limit = min(limit, MaxHits)
	s := &scan{x: x, deadline: time.Now().Add(scanTime)}
	if q.Regexp {
		re, err := regexp.Compile(q.Text)
		if err != nil {
			return Result{}, fmt.Errorf("%w: %v", ErrQuery, err)
		}
		s.regexp(re)
	} else {
		s.substring(asciiLower(q.Text))
	}
	found := s.found
	slices.SortFunc(found, func(a, b scored) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return b.d - a.d
	})
	res := Result{Hits: make([]Hit, 0, min(limit, len(found))), Truncated: s.truncated}
	for _, f := range found[:min(limit, len(found))] {
		res.Hits = append(res.Hits, x.hit(x.docs[f.d].loc, f.n, f.at))
	}
	return res, nil
}

// scored is a block that matched: its doc, its count of matches and the
// offset of its first.
type scored struct{ d, n, at int }

// scan is the work of one Search: the blocks found so far and what is
// left of its bounds.
type scan struct {
	x         *Index
	found     []scored
	matches   int
	scanned   int
	deadline  time.Time
	truncated bool
}

// add counts a match at offset at, in doc d. The matches of one block
// come together, though not always in order.
func (s *scan) add(d, at int) {
	s.matches++
	if n := len(s.found); n > 0 && s.found[n-1].d == d {
		f := &s.found[n-1]
		f.n++
		f.at = min(f.at, at)
		return
	}
	s.found = append(s.found, scored{d, 1, at})
}

// full reports, and records, that the search reached a bound.
func (s *scan) full() bool {
	if s.matches >= maxMatches {
		s.truncated = true
	}
	return s.truncated
}

// substring counts the occurrences of q, lower-cased.
func (s *scan) substring(q string) {
	s.x.occurrences(q, func(start int) int {
		s.add(s.x.docAt(start), start)
		if s.full() {
			return -1
		}
		return start + len(q)
	})
}

// occurrences calls fn with the offset in x.lower of each occurrence of q
// (lower-cased), from the first. It looks only in the chunks whose filter
// may hold q, and there for q's rarest byte: IndexByte skips ahead to it
// many bytes at a time, and only there is q compared whole. fn returns
// the offset where the next occurrence may start, or -1 to stop.
func (x *Index) occurrences(q string, fn func(start int) int) {
	j := rarest(&x.freq, q)
	c, text := q[j], x.lower
	chunk, bits := chunkBytes, gramBits(q)
	if len(q) < 3 {
		chunk = len(text) + 1
	}
	// next is where the next occurrence may start.
	for next := 0; next < len(text); {
		ci := next / chunk
		end := min(len(text), (ci+1)*chunk)
		if len(q) >= 3 && !x.mayHold(ci, bits) {
			next = end
			continue
		}
		// The occurrences that start before end have their rarest
		// byte before end+j.
		limit := min(len(text), end+j)
		for at := next + j; at < limit; {
			i := strings.IndexByte(text[at:limit], c)
			if i < 0 {
				break
			}
			start := at + i - j
			if start+len(q) <= len(text) && text[start:start+len(q)] == q {
				n := fn(start)
				if n < 0 {
					return
				}
				next = max(n, start+1)
				at = next + j
				continue
			}
			at += i + 1
		}
		next = max(next, end)
	}
}

// rarest is the index in q of its byte that is least frequent in the
// text, by freq.
func rarest(freq *[256]int, q string) int {
	j := 0
	for i := 1; i < len(q); i++ {
		if freq[q[i]] < freq[q[j]] {
			j = i
		}
	}
	return j
}

// regexp counts the matches of re. An expression every match of which
// holds one of a few literals runs only where they occur: over the run of
// the bytes a match can hold around each occurrence (the word, for
// \bcheckpoint\w*; the line, for an expression that cannot match a
// newline; the block, for one that can). Any other runs over every
// block. Either way the windows run latest first, so that a search cut
// short by its bounds has looked at the latest.
func (s *scan) regexp(re *regexp.Regexp) {
	x := s.x
	type window struct{ from, to, d int }
	var windows []window
	p := plan(re.String(), &x.freq, len(x.lower))
	if p.lits == nil {
		windows = make([]window, len(x.docs))
		for d := range x.docs {
			b := x.docBounds(d)
			windows[d] = window{b[0], b[1], d}
		}
	} else {
		for _, lit := range p.lits {
			x.occurrences(lit, func(start int) int {
				d := x.docAt(start)
				w := p.run(x.text, x.docBounds(d), start)
				if w[1] > w[0] {
					windows = append(windows, window{w[0], w[1], d})
				}
				return w[1]
			})
		}
		if len(p.lits) > 1 {
			slices.SortFunc(windows, func(a, b window) int { return a.from - b.from })
			windows = slices.Compact(windows)
		}
	}
	for i := len(windows) - 1; i >= 0; i-- {
		for w := [2]int{windows[i].from, windows[i].to}; w[1] > w[0]; {
			piece := p.lastPiece(x.text, w)
			w[1] = piece[0]
			n := piece[1] - piece[0]
			if s.scanned += n; s.scanned > scanBytes || n*p.insts > maxPieceWork || time.Now().After(s.deadline) {
				s.truncated = true
				return
			}
			for _, m := range re.FindAllStringIndex(x.text[piece[0]:piece[1]], maxMatches-s.matches) {
				if m[1] > m[0] {
					s.add(windows[i].d, piece[0]+m[0])
				}
			}
			if s.full() {
				return
			}
		}
	}
}

// pieceBytes is the size past which a window is cut in pieces, so that
// the bounds of the search are checked between them; maxPieceWork bounds
// the bytes times the instructions of the expression in one piece that
// cannot be cut (a block of one line, for an expression that spans lines
// or runs of bytes that can all be in a match).
const (
	pieceBytes   = 64 << 10
	maxPieceWork = 1 << 28
)

// lastPiece is the last piece of window w: the bytes after the last byte
// no match can hold that comes pieceBytes or more before w's end, or w
// whole. No match spans such a byte, and the expression's assertions
// read it the same as a window's edge, so the pieces of a window find
// what the window finds.
func (p *searchPlan) lastPiece(text string, w [2]int) [2]int {
	if w[1]-w[0] <= pieceBytes || p.span == spanBlock {
		return w
	}
	cut := w[1] - pieceBytes
	if p.span == spanLine {
		if i := strings.LastIndexByte(text[w[0]:cut], '\n'); i >= 0 {
			return [2]int{w[0] + i + 1, w[1]}
		}
		return w
	}
	for ; cut > w[0]; cut-- {
		if !p.bytes[text[cut-1]] {
			return [2]int{cut, w[1]}
		}
	}
	return w
}

// docBounds is the text of doc d, less the NUL that ends it.
func (x *Index) docBounds(d int) [2]int {
	end := len(x.text) - 1
	if d+1 < len(x.docs) {
		end = x.docs[d+1].start - 1
	}
	return [2]int{x.docs[d].start, end}
}

// searchPlan is what narrows where an expression must run.
type searchPlan struct {
	// lits are lower-cased ASCII literals one of which every match
	// holds; nil when there are none, or when they are so common that
	// looking for them costs more than it saves.
	lits []string
	// bytes are the bytes a match can hold or look at (a word boundary
	// looks at the word's bytes either side), and span tells which:
	// every byte, every byte but a newline, or those of bytes.
	bytes [256]bool
	span  int
	// insts is the size of the expression's program, what one byte of
	// text can cost.
	insts int
}

const (
	spanBytes = iota
	spanLine
	spanBlock
)

// run is the window around offset at, within the block doc, that every
// match holding at lies in: the longest run of bytes a match can hold.
// A match lies in such a run whole, and what the expression's
// assertions look at either side of it (a word boundary, a line's start
// or end) reads the same in the run as in the block, so the expression
// finds in the run exactly what it finds there in the block.
func (p *searchPlan) run(text string, doc [2]int, at int) [2]int {
	switch p.span {
	case spanBlock:
		return doc
	case spanLine:
		from := doc[0]
		if i := strings.LastIndexByte(text[doc[0]:at], '\n'); i >= 0 {
			from += i + 1
		}
		to := doc[1]
		if i := strings.IndexByte(text[at:doc[1]], '\n'); i >= 0 {
			to = at + i
		}
		return [2]int{from, to}
	}
	from, to := at, at
	if !p.bytes[text[at]] {
		return [2]int{at, at}
	}
	for from > doc[0] && p.bytes[text[from-1]] {
		from--
	}
	for to < doc[1] && p.bytes[text[to]] {
		to++
	}
	return [2]int{from, to}
}

// plan reads expr for what narrows where it must run.
func plan(expr string, freq *[256]int, size int) *searchPlan {
	p := &searchPlan{span: spanBlock, insts: 1}
	r, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return p
	}
	p.span = spanBytes
	r = r.Simplify()
	if prog, err := syntax.Compile(r); err == nil {
		p.insts = len(prog.Inst)
	}
	if p.lits = required(r, freq); p.lits != nil && cost(p.lits, freq) > size/16 {
		p.lits = nil
	}
	p.alphabet(r)
	switch {
	case !slices.Contains(p.bytes[:], false):
		p.span = spanBlock
	case !p.bytes['\n'] && !slices.Contains(p.bytes[:'\n'], false) && !slices.Contains(p.bytes['\n'+1:], false):
		p.span = spanLine
	}
	return p
}

// alphabet adds to p.bytes what a match of r can hold or look at. Past
// ASCII it does not tell runes apart: any byte of a UTF-8 sequence
// stands for all.
func (p *searchPlan) alphabet(r *syntax.Regexp) {
	add := func(lo, hi rune) {
		for c := lo; c <= hi && c < utf8.RuneSelf; c++ {
			p.bytes[c] = true
		}
		if hi >= utf8.RuneSelf {
			for b := utf8.RuneSelf; b < 256; b++ {
				p.bytes[b] = true
			}
		}
	}
	switch r.Op {
	case syntax.OpLiteral:
		for _, c := range r.Rune {
			add(c, c)
			if r.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(c); f != c; f = unicode.SimpleFold(f) {
					add(f, f)
				}
			}
		}
	case syntax.OpCharClass:
		for i := 0; i+1 < len(r.Rune); i += 2 {
			add(r.Rune[i], r.Rune[i+1])
		}
	case syntax.OpAnyCharNotNL, syntax.OpBeginLine, syntax.OpEndLine:
		// A line's start or end is read off the byte before or after
		// it: the window is the line.
		add(0, '\n'-1)
		add('\n'+1, unicode.MaxRune)
	case syntax.OpAnyChar, syntax.OpBeginText, syntax.OpEndText:
		add(0, unicode.MaxRune)
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		add('0', '9')
		add('A', 'Z')
		add('a', 'z')
		add('_', '_')
	}
	for _, sub := range r.Sub {
		p.alphabet(sub)
	}
}

// required is a set of literals, lower-cased, one of which every match
// of r holds; nil when it finds none. Of a concatenation's parts it
// takes the one whose literals are rarest in the text, by freq.
func required(r *syntax.Regexp, freq *[256]int) []string {
	switch r.Op {
	case syntax.OpLiteral:
		return literalPiece(r, freq)
	case syntax.OpCapture, syntax.OpPlus:
		return required(r.Sub[0], freq)
	case syntax.OpRepeat:
		if r.Min >= 1 {
			return required(r.Sub[0], freq)
		}
	case syntax.OpConcat:
		var best []string
		for _, sub := range r.Sub {
			if l := required(sub, freq); l != nil && (best == nil || cost(l, freq) < cost(best, freq)) {
				best = l
			}
		}
		return best
	case syntax.OpAlternate:
		var all []string
		for _, sub := range r.Sub {
			l := required(sub, freq)
			if l == nil {
				return nil
			}
			all = append(all, l...)
		}
		return slices.Compact(all)
	}
	return nil
}

// literalPiece is the rarest run of a literal that the lower-cased ASCII
// text can be searched for: its ASCII runs, and for a case-insensitive
// literal, runs without k or s, whose case folds to a rune outside ASCII
// (the Kelvin sign, the long s).
func literalPiece(r *syntax.Regexp, freq *[256]int) []string {
	fold := r.Flags&syntax.FoldCase != 0
	var best string
	piece := []byte{}
	end := func() {
		if len(piece) > 0 && (best == "" || cost([]string{string(piece)}, freq) < cost([]string{best}, freq)) {
			best = string(piece)
		}
		piece = piece[:0]
	}
	for _, c := range r.Rune {
		if c >= utf8.RuneSelf {
			end()
			continue
		}
		b := byte(c)
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if fold && (b == 'k' || b == 's') {
			end()
			continue
		}
		piece = append(piece, b)
	}
	end()
	if best == "" {
		return nil
	}
	return []string{best}
}

// cost is how many places a search for lits stops at: the count of each
// one's rarest byte.
func cost(lits []string, freq *[256]int) int {
	n := 0
	for _, l := range lits {
		n += freq[l[rarest(freq, l)]]
	}
	return n
}

// The chunk filter: the lower-cased text in chunks of chunkBytes, each
// with a Bloom filter of the trigrams that start in it or in the
// gramSpan bytes after it, one bit each in chunkBits. A literal of three
// bytes or more is looked for only in the chunks whose filter has all its
// trigrams (those of its first gramSpan+2 bytes): the rest of the text
// cannot hold it. This keeps a search for a literal of common letters
// ("error", "is full") from stopping at every "r" of 13 MB; the filter
// costs a quarter byte a byte of text.
const (
	chunkBytes = 1 << 10
	chunkBits  = 2 << 10
	chunkWords = chunkBits / 64
	gramSpan   = 64
)

func gramBit(a, b, c byte) uint32 {
	return (uint32(a)<<16 | uint32(b)<<8 | uint32(c)) * 0x9E3779B1 >> (32 - 11)
}

// chunkFilters builds the chunk filters of lower.
func chunkFilters(lower string) []uint64 {
	n := (len(lower) + chunkBytes - 1) / chunkBytes
	f := make([]uint64, n*chunkWords)
	for c := range n {
		words := f[c*chunkWords : (c+1)*chunkWords]
		end := min(len(lower)-2, (c+1)*chunkBytes+gramSpan)
		for i := c * chunkBytes; i < end; i++ {
			h := gramBit(lower[i], lower[i+1], lower[i+2])
			words[h/64] |= 1 << (h % 64)
		}
	}
	return f
}

// gramBits are the filter bits of q's trigrams, those of its first
// gramSpan+2 bytes.
func gramBits(q string) []uint32 {
	var bits []uint32
	for i := 0; i+2 < min(len(q), gramSpan+2); i++ {
		bits = append(bits, gramBit(q[i], q[i+1], q[i+2]))
	}
	return bits
}

// mayHold reports whether chunk c may hold an occurrence that starts in
// it of a literal of three bytes or more, by the literal's gramBits.
func (x *Index) mayHold(c int, bits []uint32) bool {
	words := x.grams[c*chunkWords : (c+1)*chunkWords]
	for _, h := range bits {
		if words[h/64]&(1<<(h%64)) == 0 {
			return false
		}
	}
	return true
}
