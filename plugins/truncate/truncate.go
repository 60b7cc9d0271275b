// Package truncate is the built-in plugin that never calls a model. As a
// strategy it writes a digest of the folded messages (the user's requests
// verbatim, the tools used, the files touched, the errors): the last
// fallback before the engine's emergency path, so it always succeeds. As a
// truncator it caps one tool output to a token limit by category, ending
// every cut with a notice that says what was left out and how to see it.
package truncate

import (
	"github.com/compact-host/compact-host/plugins/truncate/category"
	sdk "github.com/compact-host/compact-host/sdk/core"
)

// Name is the plugin's name.
const Name = "truncate"

// Output categories this plugin truncates; package category holds the
// table of tool names, so the engine reads it without linking the plugin.
const (
	HeadTail    = category.HeadTail
	MatchList   = category.MatchList
	FileContent = category.FileContent
	Generic     = category.Generic
)

// Categories lists the categories the truncator handles.
var Categories = []string{HeadTail, MatchList, FileContent, Generic}

// DefaultCategories maps the tool names of common agents to the category
// of their output; it is category.Defaults.
var DefaultCategories = category.Defaults

// CategoryFor returns the category of a tool's output per m (nil: the
// DefaultCategories), matching the name exactly, then case-insensitively,
// and Generic for a tool m does not list.
func CategoryFor(m map[string]string, tool string) string { return category.For(m, tool) }

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
