package digest

import "strings"

// Code writes s as a markdown code span, with a fence of backticks longer
// than any run inside it, so that verbatim text with backticks of its own
// stays one span.
func Code(s string) string {
	s = OneLine(s)
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if longest > 0 || strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// Balanced reports whether the inline markup of one line is closed: every
// code span opened by a run of backticks is closed by a run as long, and
// outside code spans "**" comes in pairs.
func Balanced(line string) bool {
	stars := 0
	for i := 0; i < len(line); {
		if line[i] == '`' {
			n := run(line, i, '`')
			j := i + n
			closed := false
			for j < len(line) {
				if line[j] != '`' {
					j++
					continue
				}
				m := run(line, j, '`')
				if m == n {
					closed = true
					j += m
					break
				}
				j += m
			}
			if !closed {
				return false
			}
			i = j
			continue
		}
		if strings.HasPrefix(line[i:], "**") {
			stars++
			i += 2
			continue
		}
		i++
	}
	return stars%2 == 0
}

func run(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// Plain makes a sentence taken from prose safe to write as one line of a
// summary: markup it opens and does not close is removed.
func Plain(s string) string {
	s = OneLine(s)
	if Balanced(s) {
		return s
	}
	s = strings.ReplaceAll(s, "**", "")
	if Balanced(s) {
		return s
	}
	return strings.ReplaceAll(s, "`", "'")
}
