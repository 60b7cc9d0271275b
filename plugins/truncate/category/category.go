// Package category maps tool names to the output category their results
// are truncated by. It imports nothing, so the engine (package host) can
// pick a tool's category without linking the truncate plugin or its SDK.
package category

import "strings"

// Output categories of the built-in truncator.
const (
	// HeadTail keeps the first and last lines: shell output, where the
	// command echo and the final status matter most.
	HeadTail = "head-tail"
	// MatchList keeps the leading lines: search results.
	MatchList = "match-list"
	// FileContent keeps a balanced head and tail: a file being read.
	FileContent = "file-content"
	// Generic keeps the head, cut at a line boundary.
	Generic = "generic"
)

// Defaults maps the tool names of common agents to the category of their
// output. A tool not listed is Generic. Hosts start from this map and let
// their configuration override it; look names up with For, which also
// matches case-insensitively.
var Defaults = map[string]string{
	"Bash": HeadTail, "bash": HeadTail, "shell": HeadTail, "exec_command": HeadTail,
	"run_terminal_cmd": HeadTail, "execute_command": HeadTail, "run_command": HeadTail, "terminal": HeadTail,
	"Grep": MatchList, "Glob": MatchList, "grep": MatchList, "glob": MatchList, "rg": MatchList,
	"search": MatchList, "grep_search": MatchList, "file_search": MatchList, "codebase_search": MatchList,
	"Read": FileContent, "read_file": FileContent, "view": FileContent, "View": FileContent,
	"NotebookRead": FileContent, "open_file": FileContent,
}

// For returns the category of a tool's output per m (nil: Defaults),
// matching the name exactly, then case-insensitively, and Generic for a
// tool m does not list.
func For(m map[string]string, tool string) string {
	if m == nil {
		m = Defaults
	}
	if c, ok := m[tool]; ok {
		return c
	}
	for name, c := range m {
		if strings.EqualFold(name, tool) {
			return c
		}
	}
	return Generic
}
