package bpe

import (
	"unicode"
	"unicode/utf8"
)

// The split patterns, as tiktoken-go compiles them (with
// github.com/dlclark/regexp2, which has the lookahead they need):
//
//	o200k_base:  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	            |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	            |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//	cl100k_base: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// splitO200k and splitCl100k return where the match starting at i ends.
// Every character starts a match of some alternative, so the matches
// tile the text and each begins where the last ended. They follow the
// backtracking matcher: alternatives in order, each optional prefix tried
// with then without. Runes are decoded as Go's range does (an invalid
// byte is one U+FFFD), \s is unicode.IsSpace, and (?i) folds s to ſ
// (U+017F) as well, as in regexp2.
//
// The split is the patterns' (tiktoken's, and regexp2's interpreter's),
// which differs from tiktoken-go's in two ways. tiktoken-go runs the
// matcher regexp2cg generated for each pattern, which backtracks the \s*
// of \s*[\r\n]+ to the first \r or \n of a run of spaces instead of the
// last (helpers.IndexOfAny2 where .NET's generator has LastIndexOfAny):
// it splits "\n    \n", a blank line in indented code, into "\n" and
// "    \n". And its ASCII bitmaps leave DEL (U+007F) out of
// [^\r\n\p{L}\p{N}] and [^\s\p{L}\p{N}], so no match starts at a DEL and
// tiktoken-go drops it from the count.

// Character classes, a bit each.
const (
	cL     = 1 << iota // \p{L}
	cN                 // \p{N}
	cS                 // \s
	cUpper             // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLower             // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	cNL                // [\r\n]
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = runeClass(r)
	}
	return t
}()

func runeClass(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return cS | cNL
	case unicode.IsSpace(r):
		return cS
	case unicode.IsMark(r):
		return cUpper | cLower
	case unicode.IsNumber(r):
		return cN
	case !unicode.IsLetter(r):
		return 0
	case unicode.In(r, unicode.Lu, unicode.Lt):
		return cL | cUpper
	case unicode.Is(unicode.Ll, r):
		return cL | cLower
	}
	return cL | cUpper | cLower // Lm, Lo
}

// class returns the class and the width of the character at s[i].
func class(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return runeClass(r), w
}

// prefix is [^\r\n\p{L}\p{N}]; other is [^\s\p{L}\p{N}].
func prefix(c uint8) bool { return c&(cNL|cL|cN) == 0 }
func other(c uint8) bool  { return c&(cS|cL|cN) == 0 }

// run returns the end of the run of characters of a class in want from i.
func run(s string, i int, want uint8) int {
	for i < len(s) {
		c, w := class(s, i)
		if c&want == 0 {
			break
		}
		i += w
	}
	return i
}

// contraction returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or i.
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	two := func(c byte) bool { return i+2 < len(s) && s[i+2]|0x20 == c }
	switch s[i+1] | 0x20 {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if two('e') {
			return i + 3
		}
	case 'l':
		if two('l') {
			return i + 3
		}
	case 0xc5 | 0x20: // ſ is C5 BF
		if s[i+1] == 0xc5 && i+2 < len(s) && s[i+2] == 0xbf {
			return i + 3
		}
	}
	return i
}

// upperLower is [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// at i: its end, or -1.
func upperLower(s string, i int) int {
	lastLower := -1 // the end of the last character of the upper run that is also lower
	for i < len(s) {
		c, w := class(s, i)
		if c&cUpper == 0 {
			if c&cLower != 0 {
				return run(s, i, cLower)
			}
			break
		}
		i += w
		if c&cLower != 0 {
			lastLower = i
		}
	}
	// Backtracking gives back upper characters until one is lower; the
	// lower run then ends there, as the next one is not lower.
	return lastLower
}

func splitO200k(s string, i int) int {
	c, w := class(s, i)
	// Letters, with or without one leading character.
	pre := prefix(c) && i+w < len(s)
	if pre {
		if j := upperLower(s, i+w); j >= 0 {
			return contraction(s, j)
		}
	}
	if j := upperLower(s, i); j >= 0 {
		return contraction(s, j)
	}
	if pre {
		if c2, _ := class(s, i+w); c2&cUpper != 0 {
			return contraction(s, run(s, run(s, i+w, cUpper), cLower))
		}
	}
	if c&cUpper != 0 {
		return contraction(s, run(s, run(s, i, cUpper), cLower))
	}
	return splitRest(s, i, c, w, true)
}

func splitCl100k(s string, i int) int {
	c, w := class(s, i)
	if j := contraction(s, i); j > i {
		return j
	}
	if prefix(c) && i+w < len(s) {
		if c2, _ := class(s, i+w); c2&cL != 0 {
			return run(s, i+w, cL)
		}
	}
	if c&cL != 0 {
		return run(s, i, cL)
	}
	return splitRest(s, i, c, w, false)
}

// splitRest is the alternatives the two patterns share:
// \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+, with
// [\r\n/]* for o200k (slash).
func splitRest(s string, i int, c uint8, w int, slash bool) int {
	if c&cN != 0 {
		j := i + w
		for range 2 {
			if j >= len(s) {
				break
			}
			c2, w2 := class(s, j)
			if c2&cN == 0 {
				break
			}
			j += w2
		}
		return j
	}
	j := -1
	if s[i] == ' ' && i+1 < len(s) {
		if c2, _ := class(s, i+1); other(c2) {
			j = i + 1
		}
	}
	if j < 0 && other(c) {
		j = i
	}
	if j >= 0 {
		for j < len(s) {
			c2, w2 := class(s, j)
			if !other(c2) {
				break
			}
			j += w2
		}
		for j < len(s) && (s[j] == '\r' || s[j] == '\n' || slash && s[j] == '/') {
			j++
		}
		return j
	}
	if c&cS == 0 {
		return i + w // unreachable: every class is covered above
	}
	// \s*[\r\n]+ ends after the last \r or \n of the run of spaces;
	// \s+(?!\S) ends at the end of text or before the last space.
	end, last, nl := i, i, -1
	for end < len(s) {
		c2, w2 := class(s, end)
		if c2&cS == 0 {
			break
		}
		last = end
		end += w2
		if c2&cNL != 0 {
			nl = end
		}
	}
	switch {
	case nl >= 0:
		return nl
	case end == len(s) || last == i:
		return end
	}
	return last
}
