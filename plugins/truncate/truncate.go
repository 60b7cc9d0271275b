// Package truncate is the built-in plugin that never calls a model. As a
// strategy it writes a digest of the folded messages (the user's requests
// verbatim, the tools used, the files touched, the errors): the last
// fallback before the engine's emergency path, so it always succeeds. As a
// truncator it caps one tool output to a token limit by category, ending
// every cut with a notice that says what was left out and how to see it.
package truncate

import (
	"strings"

	"github.com/compact-host/compact-host/sdk"
)

// Name is the plugin's name.
const Name = "truncate"

// Output categories this plugin truncates.
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

// Categories lists the categories the truncator handles.
var Categories = []string{HeadTail, MatchList, FileContent, Generic}

// DefaultCategories maps the tool names of common agents to the category
// of their output. A tool not listed is Generic. Hosts start from this
// map and let their configuration override it; look names up with
// CategoryFor, which also matches case-insensitively.
var DefaultCategories = map[string]string{
	"Bash": HeadTail, "bash": HeadTail, "shell": HeadTail, "exec_command": HeadTail,
	"run_terminal_cmd": HeadTail, "execute_command": HeadTail, "run_command": HeadTail, "terminal": HeadTail,
	"Grep": MatchList, "Glob": MatchList, "grep": MatchList, "glob": MatchList, "rg": MatchList,
	"search": MatchList, "grep_search": MatchList, "file_search": MatchList, "codebase_search": MatchList,
	"Read": FileContent, "read_file": FileContent, "view": FileContent, "View": FileContent,
	"NotebookRead": FileContent, "open_file": FileContent,
}

// CategoryFor returns the category of a tool's output per m (nil: the
// DefaultCategories), matching the name exactly, then case-insensitively,
// and Generic for a tool m does not list.
func CategoryFor(m map[string]string, tool string) string {
	if m == nil {
		m = DefaultCategories
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

// New returns the truncate plugin: the digest strategy and the truncator
// for the four categories.
func New() *sdk.Plugin {
	return &sdk.Plugin{
		Name:        Name,
		Version:     "1.0.0",
		Description: "Model-free digest strategy (the last fallback) and tool-output truncators: head-tail, match-list, file-content, generic.",
		Strategy:    Strategy{},
		Truncator:   Truncator{},
		Categories:  Categories,
	}
}
