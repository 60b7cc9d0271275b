package digest

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// EstimateTokens estimates the tokens of s as one per four bytes, rounded
// up. It is the estimate the plugins use when they do not ask the host.
func EstimateTokens(s string) int { return (len(s) + 3) / 4 }

// Clip shortens s to at most max bytes, keeping its head and tail and
// putting an elision marker between them. It never splits a UTF-8 sequence.
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const marker = " […] "
	if max <= len(marker)+2 {
		return cutRunes(s, max)
	}
	keep := max - len(marker)
	head := keep * 2 / 3
	tail := keep - head
	return cutRunes(s, head) + marker + tailRunes(s, tail)
}

// ClipHead shortens s to at most max bytes, keeping its head and ending
// with "…" when something was cut. It never splits a UTF-8 sequence.
func ClipHead(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ell = "…"
	if max <= len(ell) {
		return cutRunes(s, max)
	}
	return cutRunes(s, max-len(ell)) + ell
}

// cutRunes returns the longest prefix of s of at most n bytes that ends on
// a rune boundary.
func cutRunes(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// tailRunes returns the longest suffix of s of at most n bytes that starts
// on a rune boundary.
func tailRunes(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// OneLine collapses runs of whitespace (newlines included) into one space,
// as strings.Join(strings.Fields(s), " ") does. It runs for every item of
// a summary; a text already on one line comes back without a copy, any
// other is built with one allocation.
func OneLine(s string) string {
	if onOneLine(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		n, space := spaceAt(s, i)
		if space {
			i += n
			continue
		}
		j := i + n
		for j < len(s) {
			m, space := spaceAt(s, j)
			if space {
				break
			}
			j += m
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s[i:j])
		i = j
	}
	return b.String()
}

// onOneLine reports whether OneLine would return s as it is: no space but
// single ASCII spaces between words.
func onOneLine(s string) bool {
	afterSpace := true // a leading space is one to drop
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c > ' ' && c < utf8.RuneSelf:
			afterSpace = false
		case c == ' ':
			if afterSpace {
				return false
			}
			afterSpace = true
		default:
			n, space := spaceAt(s, i)
			if space {
				return false
			}
			afterSpace = false
			i += n - 1
		}
	}
	return !afterSpace || s == ""
}

// spaceAt returns the length of the rune at s[i] and whether it is white
// space to strings.Fields.
func spaceAt(s string, i int) (int, bool) {
	if c := s[i]; c < utf8.RuneSelf {
		return 1, c == ' ' || c >= '\t' && c <= '\r'
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return n, unicode.IsSpace(r)
}

// FirstSentence returns the first sentence of s on one line, clipped to max bytes.
func FirstSentence(s string, max int) string {
	s = OneLine(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.', '!', '?':
			if sentenceEnd(s, i) {
				return ClipHead(s[:i+1], max)
			}
		}
	}
	return ClipHead(s, max)
}

// FocusTerms splits a focus text into lower-case words of three letters or
// more, the words Relevant looks for.
func FocusTerms(focus string) []string {
	var terms []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(focus), func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r == '/' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127)
	}) {
		w = strings.Trim(w, ".-/")
		if len(w) < 3 || stopWords[w] || seen[w] {
			continue
		}
		seen[w] = true
		terms = append(terms, w)
	}
	return terms
}

var stopWords = map[string]bool{
	"the": true, "and": true, "for": true, "with": true, "that": true, "this": true, "keep": true,
	"about": true, "from": true, "into": true, "what": true, "all": true, "any": true, "are": true,
}

// Relevant reports whether text mentions any of terms (case-insensitive).
func Relevant(text string, terms []string) bool {
	if len(terms) == 0 {
		return false
	}
	lower := strings.ToLower(text)
	for _, t := range terms {
		if strings.Contains(lower, t) {
			return true
		}
	}
	return false
}
