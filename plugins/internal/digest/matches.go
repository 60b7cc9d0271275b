package digest

import (
	"strings"
)

// Match is what a search (a grep, a search tool) found that answers it:
// the lines of its output that define or assign what was searched for
// ("const MAX_OUTPUT_LENGTH = 100000;"), verbatim.
type Match struct {
	// Index is the position of the message holding the output.
	Index int
	// Call names the search: the tool or program and its pattern.
	Call string
	// Lines are the defining lines, at most matchLines, in output order.
	Lines []string
}

// Limits of the match scan: the newest searches only, the head of each
// output only, a few short lines of each.
const (
	matchScan     = 200
	matchRead     = 8192
	matchLines    = 4
	matchWidth    = 200
	matchTermMin  = 3
	matchSearches = 6
	// matchTerms bounds the names read from one pattern: a pasted
	// query of thousands of words costs no more than a short one.
	matchTerms = 8
)

// Matches returns, oldest first, the lines the newest searches found
// that define or assign one of the names searched for: a value an agent
// looked up is a fact it relies on later. A function searched for keeps
// the output's next line with its signature when that line assigns
// (parameter defaults, the first statement of the body). Of the newest matchScan calls,
// at most matchSearches searches with such lines are kept, and a line
// found twice is kept once.
func Matches(calls []Call) []Match {
	var out []Match
	seen := map[string]bool{}
	for i := len(calls) - 1; i >= max(0, len(calls)-matchScan) && len(out) < matchSearches; i-- {
		c := &calls[i]
		if c.Result == nil || c.Result.IsError {
			continue
		}
		name, pattern := searchOf(c)
		terms := searchTerms(pattern)
		if len(terms) == 0 {
			continue
		}
		var lines []string
		body := false // the previous line opened a function searched for
		for line := range strings.SplitSeq(cutRunes(c.Result.Text, matchRead), "\n") {
			code := strings.TrimSpace(matchedCode(line))
			first := body && strings.Contains(code, " = ")
			body = false
			if code == "" || seen[code] {
				continue
			}
			kind := defines(code, terms)
			if kind == 0 && !first {
				continue
			}
			body = kind == opensFunction
			seen[code] = true
			if lines = append(lines, ClipHead(code, matchWidth)); len(lines) == matchLines {
				break
			}
		}
		if len(lines) > 0 {
			out = append(out, Match{Index: c.Result.Index, Call: ClipHead(name+" "+OneLine(pattern), 120), Lines: lines})
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// searchOf returns the name and pattern of a search call: a shell grep
// (grep, rg, ag, ack, git grep) or a search tool of an agent (a name
// holding "grep" or "search" with a pattern, regex or query), else "".
func searchOf(c *Call) (name, pattern string) {
	if c.IsShell() {
		w := shellWords(mainCommand(c.Command))
		if len(w) > 1 && w[0] == "git" && w[1] == "grep" {
			w = w[1:]
		}
		if len(w) < 2 {
			return "", ""
		}
		switch prog := w[0][strings.LastIndexByte(w[0], '/')+1:]; prog {
		case "grep", "egrep", "rg", "ag", "ack":
			return prog, shellPattern(w[1:])
		}
		return "", ""
	}
	if !strings.Contains(c.tool, "grep") && !strings.Contains(c.tool, "search") {
		return "", ""
	}
	for _, k := range []string{"pattern", "regex", "query"} {
		if s := c.Str(k); s != "" {
			return c.Name, s
		}
	}
	return "", ""
}

// shellWords splits a command into words, a quoted argument ('a b',
// "a b") one word without its quotes.
func shellWords(cmd string) []string {
	var out []string
	var b strings.Builder
	var quote byte
	in := false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			b.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
		default:
			b.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, b.String())
	}
	return out
}

// shellPattern is the pattern among a grep's arguments: the one after
// -e, or the first that is not an option.
func shellPattern(args []string) string {
	for i, a := range args {
		if a == "-e" || a == "--regexp" {
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		}
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// searchTerms are the names a pattern searches for: its runs of letters,
// digits and underscores of matchTermMin bytes or more, regex escapes
// (\b, \s, \w) left out, in lower case, the first matchTerms of them.
func searchTerms(pattern string) []string {
	var out []string
	start := -1
	flush := func(end int) {
		if start >= 0 && end-start >= matchTermMin {
			out = appendUnique(out, strings.ToLower(pattern[start:end]))
		}
		start = -1
	}
	for i := 0; i < len(pattern) && len(out) < matchTerms; i++ {
		b := pattern[i]
		switch {
		case b == '\\':
			flush(i)
			i++ // the escaped letter is not part of a name
		case isWordByte(b):
			if start < 0 {
				start = i
			}
		default:
			flush(i)
		}
	}
	if len(out) < matchTerms {
		flush(len(pattern))
	}
	return out
}

// matchedCode is a line of search output without what the search put
// before the code: "path:12:", "12:", " 12 | " (the line-numbered
// listings of Cline-family agents), or "path:" when the prefix is a path.
func matchedCode(line string) string {
	if bar := strings.IndexByte(line, '|'); bar > 0 && allDigits(strings.TrimSpace(line[:bar])) {
		return line[bar+1:]
	}
	if k := strings.IndexByte(line, ':'); k > 0 {
		head, rest := line[:k], line[k+1:]
		if allDigits(head) {
			return rest
		}
		if !strings.ContainsAny(head, " \t") && strings.ContainsAny(head, "./") {
			if n := strings.IndexByte(rest, ':'); n > 0 && allDigits(rest[:n]) {
				return rest[n+1:]
			}
			return rest
		}
	}
	return line
}

// Words that, before a name, make a line its declaration.
var declarers = []string{"const", "let", "var", "def", "func", "function", "class", "type", "interface", "struct", "enum", "#define", "fn", "val"}

// How a line defines a name searched for.
const (
	definesValue  = 1 // assigns it or declares it
	opensFunction = 2 // opens its body: "name(args) {", "def name(args):"
)

// defines reports how code defines one of terms, or 0: a term followed
// by "=" (not a comparison), ":" with a value, or ":="; preceded by a
// declaring word (const, def, func…); or followed by its parameters on a
// line that opens a body.
func defines(code string, terms []string) int {
	lower := strings.ToLower(code)
	opens := strings.HasSuffix(lower, "{") || strings.HasSuffix(lower, ":")
	for _, t := range terms {
		for from := 0; ; {
			k := strings.Index(lower[from:], t)
			if k < 0 {
				break
			}
			k += from
			end := k + len(t)
			from = end
			if k > 0 && isWordByte(lower[k-1]) || end < len(lower) && isWordByte(lower[end]) {
				continue // part of a longer name
			}
			rest := strings.TrimLeft(lower[end:], " \t")
			switch {
			case opens && strings.HasPrefix(rest, "(") && !strings.HasSuffix(strings.TrimSpace(lower[:k]), "."):
				return opensFunction
			case assigns(rest) || declared(lower[:k]):
				return definesValue
			}
		}
	}
	return 0
}

// assigns reports whether rest, what follows a name, gives it a value.
func assigns(rest string) bool {
	rest = strings.TrimLeft(rest, "\"'`?! \t")
	switch {
	case strings.HasPrefix(rest, ":="):
		return true
	case strings.HasPrefix(rest, "="):
		return !strings.HasPrefix(rest, "==") && !strings.HasPrefix(rest, "=>")
	case strings.HasPrefix(rest, ":"):
		return len(strings.Trim(rest[1:], " \t,;{")) > 0
	}
	return false
}

// declared reports whether before, what precedes a name on its line,
// ends with a declaring word.
func declared(before string) bool {
	f := strings.Fields(before)
	if len(f) == 0 {
		return false
	}
	last := f[len(f)-1]
	for _, d := range declarers {
		if last == d {
			return true
		}
	}
	return false
}
