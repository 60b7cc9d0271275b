package digest

import (
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// Markers of the SEARCH/REPLACE blocks an agent that edits through its
// text (Aider) writes: the file's path on the line before the opening
// marker (a code fence between them allowed), the text to find, then the
// text to put in its place.
const (
	searchMarker  = "<<<<<<< SEARCH"
	dividerMarker = "======="
	replaceMarker = ">>>>>>> REPLACE"
)

// textEdits appends to calls an edit per SEARCH/REPLACE block of the
// text of m, msgs[i], as if the agent had called an edit tool with the
// file's path and the old and new text: what changed reads the same
// whichever way it was asked for. A message with tool calls of its own is
// left to them.
func textEdits(calls []Call, m abi.Message, i int) []Call {
	for _, b := range m.Content {
		if b.Type == abi.BlockToolUse {
			return calls
		}
	}
	for _, b := range m.Content {
		if b.Type != abi.BlockText || !strings.Contains(b.Text, searchMarker) {
			continue
		}
		lines := strings.Split(b.Text, "\n")
		for j := 0; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) != searchMarker {
				continue
			}
			path := editPath(lines[:j])
			var old, nw []string
			k, inNew, closed := j+1, false, false
			for ; k < len(lines); k++ {
				t := strings.TrimRight(lines[k], " \r")
				switch {
				case !inNew && t == dividerMarker:
					inNew = true
					continue
				case inNew && t == replaceMarker:
					closed = true
				case inNew:
					nw = append(nw, lines[k])
				default:
					old = append(old, lines[k])
				}
				if closed {
					break
				}
			}
			j = k
			if !closed || path == "" {
				continue
			}
			calls = append(calls, Call{Index: i, Name: "SEARCH/REPLACE", tool: "search/replace edit", Input: map[string]any{
				"file_path": path, "old_string": strings.Join(old, "\n"), "new_string": strings.Join(nw, "\n"),
			}})
		}
	}
	return calls
}

// editPath is the path named on the last non-blank line before a
// SEARCH marker, skipping one code fence; "" when that line is not a
// path (prose, or nothing).
func editPath(before []string) string {
	for k := len(before) - 1; k >= 0 && k >= len(before)-3; k-- {
		t := strings.TrimSpace(before[k])
		if t == "" || strings.HasPrefix(t, "```") {
			continue
		}
		t = strings.Trim(t, "`*")
		if t == "" || strings.ContainsAny(t, " \t") || !strings.ContainsAny(t, "./") {
			return ""
		}
		return t
	}
	return ""
}
