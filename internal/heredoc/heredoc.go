// Package heredoc reads the here-documents of a shell command: which lines
// of it are a body (data given to a command, not commands) and where each
// body ends. The engine's file operations and the offline summaries read
// commands with it, so both pass over the same lines.
//
// An operator is "<<" that is not part of a longer run of '<' ("<<<" is a
// here-string), an optional '-' (the terminator may then be indented with
// tabs), blanks, and a delimiter word, which ends at a blank or a shell
// metacharacter and loses its quotes and backslashes. The bodies of a
// line's operators follow the line, one after the other, each ended by the
// first line that is its delimiter. A body whose terminator is missing is
// not a body: "<<" in a quoted string or an arithmetic expression then
// changes nothing, where a shell would read to the end. After MaxMisses
// such operators, the rest of a command is read as commands.
package heredoc

import "strings"

// MaxMisses is how many operators whose terminator is missing a command
// may hold before the rest of it is read without looking for bodies. Each
// such operator costs a search to the end of the command: without a
// bound, a command of many lines each holding "<<" would cost the square
// of its length.
const MaxMisses = 8

// A Reader finds the bodies of one command's here-documents, line by line,
// and counts the operators whose terminator is missing (MaxMisses). The
// zero value is ready; use one per command.
type Reader struct {
	misses int
}

// BodiesEnd reads the operators of the line cmd[line:nl], whose newline is
// cmd[nl], and returns the offset just past the terminator of the last body
// that has one, or nl+1 when no body follows the line.
func (r *Reader) BodiesEnd(cmd string, line, nl int) int {
	at := nl + 1
	if r.misses >= MaxMisses {
		return at
	}
	for i := 0; ; {
		delim, tabs, next, ok := Op(cmd[line:nl], i)
		if !ok {
			break
		}
		i = next
		end := End(cmd, at, delim, tabs)
		if end < 0 {
			r.misses++
			break
		}
		at = end
	}
	return at
}

// Op reads the first operator of line at or after offset i: its delimiter,
// whether it is <<-, and where reading goes on; ok is false when there is
// none.
func Op(line string, i int) (delim string, tabs bool, next int, ok bool) {
	for {
		j := strings.Index(line[i:], "<<")
		if j < 0 {
			return "", false, len(line), false
		}
		op := i + j
		i = op + 2
		if op > 0 && line[op-1] == '<' || i < len(line) && line[i] == '<' {
			for i < len(line) && line[i] == '<' { // a here-string, or more angles
				i++
			}
			continue
		}
		tabs = i < len(line) && line[i] == '-'
		if tabs {
			i++
		}
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		w := i
		for i < len(line) && !wordEnd(line[i]) {
			i++
		}
		if delim = unquote(line[w:i]); delim != "" {
			return delim, tabs, i, true
		}
	}
}

// End is the offset just past the first line at or after from (a line
// start) that is delim, after leading tabs when tabs; -1 if there is none.
func End(cmd string, from int, delim string, tabs bool) int {
	for q := from; q < len(cmd); {
		j := strings.Index(cmd[q:], delim)
		if j < 0 {
			return -1
		}
		s, e := q+j, q+j+len(delim)
		ls := s
		for tabs && ls > from && cmd[ls-1] == '\t' {
			ls--
		}
		if (ls == from || cmd[ls-1] == '\n') && (e == len(cmd) || cmd[e] == '\n') {
			return min(e+1, len(cmd))
		}
		q = s + 1
	}
	return -1
}

// Strip returns cmd without the bodies of its here-documents and their
// terminator lines: the lines a shell reads as commands.
func Strip(cmd string) string {
	if !strings.Contains(cmd, "<<") {
		return cmd
	}
	var b strings.Builder
	b.Grow(len(cmd))
	var r Reader
	for line := 0; line < len(cmd); {
		nl := strings.IndexByte(cmd[line:], '\n')
		if nl < 0 {
			b.WriteString(cmd[line:])
			break
		}
		nl += line
		b.WriteString(cmd[line : nl+1])
		line = r.BodiesEnd(cmd, line, nl)
	}
	return b.String()
}

// wordEnd reports whether c ends a delimiter word: a blank or a shell
// metacharacter.
func wordEnd(c byte) bool {
	switch c {
	case ' ', '\t', '\n', ';', '|', '&', '<', '>', '(', ')':
		return true
	}
	return false
}

// unquote is a delimiter word without its quotes and backslashes.
func unquote(w string) string {
	if strings.IndexAny(w, `'"\`) < 0 {
		return w
	}
	b := make([]byte, 0, len(w))
	for i := 0; i < len(w); i++ {
		if c := w[i]; c != '\'' && c != '"' && c != '\\' {
			b = append(b, c)
		}
	}
	return string(b)
}
