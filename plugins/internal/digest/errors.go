package digest

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
)

// ErrorNote is an error the folded messages show: a tool result flagged as
// an error, or shell output that reads as a failure.
type ErrorNote struct {
	// Index is the position of the message holding the result.
	Index int
	// Call describes the call that failed (see Call.Brief).
	Call string
	// Text is the telling lines of the output, verbatim.
	Text string
}

// Errors returns the errors msgs show, oldest first. Outputs of tools that
// show file content or search results are only counted when flagged as
// errors, since code that mentions errors is not a failure.
func Errors(msgs []abi.Message) []ErrorNote { return errorsOf(msgs, Calls(msgs)) }

// errorsOf is Errors with the calls of msgs already paired.
func errorsOf(msgs []abi.Message, calls []Call) []ErrorNote {
	var out []ErrorNote
	seen := map[int]bool{}
	for _, c := range calls {
		r := c.Result
		if r == nil {
			continue
		}
		seen[r.Index] = true
		var text string
		switch {
		case notRun(r.Text):
		case r.IsError:
			text = errorExcerpt(r.Text, true)
		case c.IsShell() || strings.Contains(c.tool, "bash") || strings.Contains(c.tool, "shell"):
			text = errorExcerpt(r.Text, false)
		}
		if text != "" {
			out = append(out, ErrorNote{Index: r.Index, Call: c.Brief(120), Text: text})
		}
	}
	// Results whose call is not in the folded part still count when flagged.
	for i, m := range msgs {
		if seen[i] {
			continue
		}
		for _, b := range m.Content {
			if b.Type == abi.BlockToolResult && b.IsError && !notRun(b.Text) {
				if text := errorExcerpt(b.Text, true); text != "" {
					out = append(out, ErrorNote{Index: i, Call: "tool", Text: text})
				}
			}
		}
	}
	sortNotes(out)
	return out
}

// notRun reports whether a tool result says only that the call was not
// run because another call of the same batch failed (Claude Code's
// "Sibling tool call errored"): the failure is the other call's, listed
// with it, and this call neither failed nor needs a fix.
func notRun(text string) bool {
	return strings.Contains(text, "Sibling tool call errored") && len(strings.TrimSpace(text)) < 120
}

func sortNotes(ns []ErrorNote) {
	for i := 1; i < len(ns); i++ {
		for j := i; j > 0 && ns[j].Index < ns[j-1].Index; j-- {
			ns[j], ns[j-1] = ns[j-1], ns[j]
		}
	}
}

// errorExcerpt picks up to three error lines of output, each clipped. A
// flagged result with no such line gives its first non-empty lines.
func errorExcerpt(output string, flagged bool) string {
	var hits []string
	for pos := 0; pos < len(output); {
		start, end, ok := nextCandidate(output, pos)
		if !ok {
			break
		}
		pos = end + 1
		t := strings.TrimSpace(output[start:end])
		if !isErrorLine(t) {
			continue
		}
		if strings.HasPrefix(t, "Traceback") {
			// The exception itself is the last line of the traceback.
			for next := output[min(pos, len(output)):]; next != ""; {
				var l string
				l, next, _ = strings.Cut(next, "\n")
				if u := strings.TrimSpace(l); u != "" && !strings.HasPrefix(l, " ") {
					t = u
					break
				}
			}
		}
		hits = appendUnique(hits, ClipHead(t, 240))
	}
	hits = pickHits(hits)
	if len(hits) == 0 && flagged {
		for rest := output; rest != "" && len(hits) < 2; {
			var line string
			line, rest, _ = strings.Cut(rest, "\n")
			if t := strings.TrimSpace(line); t != "" {
				hits = append(hits, ClipHead(t, 240))
			}
		}
		if len(hits) == 0 {
			hits = []string{"(error with no output)"}
		}
	}
	return strings.Join(hits, "\n")
}

// nextCandidate finds the first line of s, from the line that starts at
// pos, that isErrorLine could accept once trimmed: one that starts with a
// word isErrorLine looks for at the start, or holds a word it looks for
// anywhere, or a position ":line:col: ". It returns the line's bounds,
// newline excluded. It looks at each byte once, most through a table:
// most lines are none of these. The words it compares (with hasWord) hold
// no 'k' or 's', the letters whose (?i) folds leave ASCII, so "traceba"
// stands for Traceback and "file or directory" for "no such file or
// directory".
func nextCandidate(s string, pos int) (start, end int, ok bool) {
	for pos < len(s) {
		start, i := pos, pos
		for i < len(s) { // as strings.TrimSpace trims the line's start
			if c := s[i]; c < utf8.RuneSelf {
				if c != ' ' && c != '\t' && c != '\v' && c != '\f' && c != '\r' {
					break
				}
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if !unicode.IsSpace(r) {
				break
			}
			i += size
		}
		found := false
		for _, w := range anchoredWords {
			if hasWord(s[i:], w) {
				found = true
				break
			}
		}
		for ; !found && i < len(s); i++ {
			c := candidateByte[s[i]]
			if c == 0 {
				continue
			}
			if c == '\n' {
				break
			}
			found = i+1 < len(s) && candidateNext[c][s[i+1]] && candidateAt(s[i:])
		}
		if found {
			end = strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return start, len(s), true
			}
			return start, i + end, true
		}
		pos = i + 1
	}
	return 0, 0, false
}

// anchoredWords start the alternatives of isErrorLine anchored at the
// start of a line (but for file:line:col, found by candidateAt).
var anchoredWords = []string{"error", "fatal", "panic", "fail", "--- fail", "npm err!", "traceba"}

// candidateByte marks the newline and the first bytes of what candidateAt
// accepts, and candidateNext the second bytes that may follow them: the
// loop calls candidateAt only past both tables.
var (
	candidateByte = [256]byte{'\n': '\n', 'e': 'e', 'E': 'e', 'c': 'c', 'C': 'c', 'f': 'f', 'F': 'f', '<': '<', ':': ':'}
	candidateNext = [256]*[256]bool{
		'e': {'r': true, 'R': true, 'x': true, 'X': true},
		'c': {'o': true, 'O': true},
		'f': {'i': true, 'I': true},
		'<': {'r': true, 'R': true},
		':': {'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true},
	}
)

// candidateAt reports whether s starts with a word isErrorLine looks for
// anywhere in a line, or with a position ":line:col: ".
func candidateAt(s string) bool {
	switch candidateByte[s[0]] {
	case 'e':
		return hasWord(s, "error") || hasWord(s, "exit") || hasWord(s, "exception")
	case 'c':
		return hasWord(s, "command not found")
	case 'f':
		return hasWord(s, "file or directory")
	case '<':
		return hasWord(s, "<returncode>")
	case ':':
		i := digits(s, 1)
		if i == 1 || i == len(s) || s[i] != ':' {
			return false
		}
		j := digits(s, i+1)
		return j > i+1 && j+1 < len(s) && s[j] == ':' && s[j+1] == ' '
	}
	return false
}

// digits returns the end of the run of ASCII digits of s that starts at i.
func digits(s string, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// isErrorLine reports whether line, trimmed, carries a failure: a
// compiler or tool diagnostic, a test failure, an exception, a panic or a
// non-zero exit as the common agents report them. It matches what this
// regexp matches (TestErrorLine checks it against it), without running a
// regexp on every line of every shell output, which was most of the time
// of an offline summary:
//
//	(?i)^\S+:\d+:\d+: |^(?:error|fatal|panic)\b[:\[ ]|^\S*(?:error|exception)\b:|
//	^(?:--- )?FAIL\b|^npm ERR!|: (?:error|fatal error)\b|\berror (?:TS|CS)\d+|
//	command not found|no such file or directory|^Traceback \(most recent call last\)|
//	exit (?:status|code):? [1-9]|exited with code [1-9]|<returncode>[1-9]
//
// Letters match in either case, and as (?i) folds them 'k' also matches the
// Kelvin sign and 's' the long s (see foldPrefix).
func isErrorLine(line string) bool {
	if line == "" {
		return false
	}
	// The alternatives anchored at the start of the line.
	for _, w := range []string{"error", "fatal", "panic"} {
		if n := foldPrefix(line, w); n > 0 && n < len(line) && (line[n] == ':' || line[n] == '[' || line[n] == ' ') {
			return true
		}
	}
	for _, w := range []string{"fail", "--- fail"} {
		if n := foldPrefix(line, w); n > 0 && (n == len(line) || !isWordByte(line[n])) {
			return true
		}
	}
	if foldPrefix(line, "npm err!") > 0 || foldPrefix(line, "traceback (most recent call last)") > 0 {
		return true
	}
	word := 0 // the end of ^\S*
	for word < len(line) && !isSpace(line[word]) {
		word++
	}
	if word < len(line) && line[word] == ' ' && fileLineCol(line[:word]) {
		return true
	}
	for i := 0; i < len(line); i++ {
		rest := line[i:]
		switch lower(line[i]) {
		case 'e':
			if i < word && (foldPrefix(rest, "error:") > 0 || foldPrefix(rest, "exception:") > 0) {
				return true
			}
			if (i == 0 || !isWordByte(line[i-1])) && errorCode(rest) {
				return true
			}
			if n := foldPrefix(rest, "exit "); n > 0 && exitStatus(rest[n:]) {
				return true
			}
			if n := foldPrefix(rest, "exited with code "); n > 0 && nonZeroDigit(rest, n) {
				return true
			}
		case ':':
			for _, w := range []string{": error", ": fatal error"} {
				if n := foldPrefix(rest, w); n > 0 && (n == len(rest) || !isWordByte(rest[n])) {
					return true
				}
			}
		case 'c':
			if foldPrefix(rest, "command not found") > 0 {
				return true
			}
		case 'n':
			if foldPrefix(rest, "no such file or directory") > 0 {
				return true
			}
		case '<':
			if n := foldPrefix(rest, "<returncode>"); n > 0 && nonZeroDigit(rest, n) {
				return true
			}
		}
	}
	return false
}

// errorCode reports whether s starts with "error TS1234" or "error CS1234"
// (?i): error (?:TS|CS)\d+.
func errorCode(s string) bool {
	n := foldPrefix(s, "error ")
	if n < 0 || n == len(s) || (lower(s[n]) != 't' && lower(s[n]) != 'c') {
		return false
	}
	m := foldPrefix(s[n+1:], "s")
	return m > 0 && n+1+m < len(s) && isDigit(s[n+1+m])
}

// exitStatus reports whether s, what follows "exit ", is (?i)(?:status|code):? [1-9].
func exitStatus(s string) bool {
	n := foldPrefix(s, "status")
	if n < 0 {
		n = foldPrefix(s, "code")
	}
	if n < 0 {
		return false
	}
	if n < len(s) && s[n] == ':' {
		n++
	}
	return n < len(s) && s[n] == ' ' && nonZeroDigit(s, n+1)
}

// foldPrefix returns the length of the prefix of s that matches pattern
// (lower case ASCII) as (?i) matches it, or -1. A letter matches its upper
// case too, 'k' also the Kelvin sign K and 's' the long s ſ, the only
// letters whose case folding leaves ASCII; other bytes match themselves.
func foldPrefix(s, pattern string) int {
	n := 0
	for i := 0; i < len(pattern); i++ {
		if n == len(s) {
			return -1
		}
		switch c := pattern[i]; {
		case lower(s[n]) == c:
			n++
		case c == 'k' && strings.HasPrefix(s[n:], "\u212a"):
			n += len("\u212a")
		case c == 's' && strings.HasPrefix(s[n:], "\u017f"):
			n += len("\u017f")
		default:
			return -1
		}
	}
	return n
}

// isWordByte reports whether c is a word character of \b: [0-9A-Za-z_].
// A byte of a multi-byte character is not.
func isWordByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= lower(c) && lower(c) <= 'z' || c == '_'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// fileLineCol reports whether word, a line's first word, is a diagnostic's
// position: something, then ":line:col:".
func fileLineCol(word string) bool {
	if len(word) < 6 || word[len(word)-1] != ':' {
		return false
	}
	i := len(word) - 1
	for _, sep := range []byte{':', ':'} {
		j := i
		for j > 0 && '0' <= word[j-1] && word[j-1] <= '9' {
			j--
		}
		if j == i || j == 0 || word[j-1] != sep {
			return false
		}
		i = j - 1
	}
	return i > 0
}

// nonZeroDigit reports whether s[i] is one of 1-9.
func nonZeroDigit(s string, i int) bool { return i < len(s) && '1' <= s[i] && s[i] <= '9' }

// hasSuffixWord reports whether s ends with word (lower case) in any ASCII case.
func hasSuffixWord(s, word string) bool {
	return len(s) >= len(word) && hasWord(s[len(s)-len(word):], word)
}

// isSpace is \s of Go's regexp syntax.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// hasWord reports whether s starts with word (lower case) in any ASCII case.
func hasWord(s, word string) bool {
	if len(s) < len(word) {
		return false
	}
	for i := 0; i < len(word); i++ {
		if lower(s[i]) != word[i] {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// weakLine matches error lines that only say that something failed, not what.
var weakLine = regexp.MustCompile(`^(?:FAIL\b|exit (?:status|code)|Process exited|<returncode>)`)

// pickHits keeps at most three error lines: the first and the last two of
// those that say what failed, then a line that only says that it failed.
func pickHits(hits []string) []string {
	var strong, weak []string
	for _, h := range hits {
		if weakLine.MatchString(h) {
			weak = append(weak, h)
		} else {
			strong = append(strong, h)
		}
	}
	if len(strong) > 3 {
		strong = append(strong[:1], strong[len(strong)-2:]...)
	}
	if len(strong) < 3 && len(weak) > 0 {
		strong = append(strong, weak[0])
	}
	return strong
}
