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
func Errors(msgs []abi.Message) []ErrorNote {
	var out []ErrorNote
	seen := map[int]bool{}
	for _, c := range Calls(msgs) {
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
	lines := strings.Split(output, "\n")
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if t == "" || !errorLine.MatchString(t) {
			continue
		}
		if strings.HasPrefix(t, "Traceback") {
			// The exception itself is the last line of the traceback.
			for j := i + 1; j < len(lines); j++ {
				if u := strings.TrimSpace(lines[j]); u != "" && !strings.HasPrefix(lines[j], " ") {
					t = u
					break
				}
			}
		}
		hits = appendUnique(hits, ClipHead(t, 240))
	}
	hits = pickHits(hits)
	if len(hits) == 0 && flagged {
		for _, line := range lines {
			if t := strings.TrimSpace(line); t != "" {
				hits = append(hits, ClipHead(t, 240))
				if len(hits) == 2 {
					break
				}
			}
		}
		if len(hits) == 0 {
			hits = []string{"(error with no output)"}
		}
	}
	return strings.Join(hits, "\n")
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
