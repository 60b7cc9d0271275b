package digest

import (
	"regexp"
	"strings"

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

// errorLine matches the lines that carry a failure in tool output:
// compiler and tool diagnostics, test failures, exceptions, panics and
// non-zero exits as the common agents report them.
var errorLine = regexp.MustCompile(`(?i)^\S+:\d+:\d+: |^(?:error|fatal|panic)\b[:\[ ]|^\S*(?:error|exception)\b:|^(?:--- )?FAIL\b|^npm ERR!|: (?:error|fatal error)\b|\berror (?:TS|CS)\d+|command not found|no such file or directory|^Traceback \(most recent call last\)|exit (?:status|code):? [1-9]|exited with code [1-9]|<returncode>[1-9]`)

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
		case r.IsError:
			text = errorExcerpt(r.Text, true)
		case c.IsShell() || strings.Contains(strings.ToLower(c.Name), "bash") || strings.Contains(strings.ToLower(c.Name), "shell"):
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
			if b.Type == abi.BlockToolResult && b.IsError {
				if text := errorExcerpt(b.Text, true); text != "" {
					out = append(out, ErrorNote{Index: i, Call: "tool", Text: text})
				}
			}
		}
	}
	sortNotes(out)
	return out
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
	for rest := output; rest != ""; {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		t := strings.TrimSpace(line)
		if t == "" || !mayBeErrorLine(t) || !errorLine.MatchString(t) {
			continue
		}
		if strings.HasPrefix(t, "Traceback") {
			// The exception itself is the last line of the traceback.
			for next := rest; next != ""; {
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

// mayBeErrorLine reports whether line could match errorLine: whether it
// has what one of the regexp's alternatives cannot match without, checked
// byte by byte in any ASCII case. It is a necessary condition that costs one
// pass over the line, so the regexp runs only on the few lines that may
// match: most tool output, code that mentions errors included, is not a
// failure. Keep it in step with errorLine; TestErrorLinePrefilter checks it
// against the regexp.
//
// The words compared avoid 'k' and 's': under (?i) those also match the
// Kelvin sign and the long s, which an ASCII comparison would miss. So
// "traceba" stands for "Traceback" and "file or directory" for "no such
// file or directory"; "exit " and "exit status" are checked up to the 's'.
func mayBeErrorLine(line string) bool {
	if line == "" {
		return false
	}
	// The alternatives anchored at the start of the line:
	// ^(?:error|fatal|panic)\b, ^(?:--- )?FAIL\b, ^npm ERR!, ^Traceback.
	switch lower(line[0]) {
	case 'e':
		if hasWord(line, "error") {
			return true
		}
	case 'f':
		if hasWord(line, "fatal") || hasWord(line, "fail") {
			return true
		}
	case 'p':
		if hasWord(line, "panic") {
			return true
		}
	case '-':
		if hasWord(line, "--- fail") {
			return true
		}
	case 'n':
		if hasWord(line, "npm err!") {
			return true
		}
	case 't':
		if hasWord(line, "traceba") {
			return true
		}
	}
	// ^\S+:\d+:\d+: and ^\S*(?:error|exception)\b: need what comes
	// before the first white space.
	word := 0
	for word < len(line) && !isSpace(line[word]) {
		word++
	}
	if fileLineCol(line[:word]) && word < len(line) && line[word] == ' ' {
		return true
	}
	for i := 0; i < len(line); i++ {
		if !errorWordStart[line[i]] {
			continue
		}
		rest := line[i:]
		switch lower(line[i]) {
		case 'e':
			switch {
			case hasWord(rest, "error"):
				// ^\S*error\b:, : error\b, : fatal error\b, \berror (?:TS|CS)\d+
				if i < word && hasWord(rest[5:], ":") || hasSuffixWord(line[:i], ": ") || hasSuffixWord(line[:i], ": fatal ") ||
					hasWord(rest[5:], " t") || hasWord(rest[5:], " c") {
					return true
				}
			case hasWord(rest, "exception:"): // ^\S*exception\b:
				if i < word {
					return true
				}
			case hasWord(rest, "exit "): // exit (?:status|code):? [1-9]
				return true
			case hasWord(rest, "exited with code "): // exited with code [1-9]
				if nonZeroDigit(rest, len("exited with code ")) {
					return true
				}
			}
		case 'c':
			if hasWord(rest, "command not found") {
				return true
			}
		case 'f':
			if hasWord(rest, "file or directory") {
				return true
			}
		case '<':
			if hasWord(rest, "<returncode>") && nonZeroDigit(rest, len("<returncode>")) {
				return true
			}
		}
	}
	return false
}

// errorWordStart marks the first bytes of the words mayBeErrorLine looks
// for anywhere in a line.
var errorWordStart = [256]bool{'e': true, 'E': true, 'c': true, 'C': true, 'f': true, 'F': true, '<': true}

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
