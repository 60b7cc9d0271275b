package pluginstest

import (
	"encoding/json"
	"fmt"

	"github.com/compact-host/compact-host/abi"
)

// User returns a user message with text.
func User(text string) abi.Message {
	return abi.Message{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: text}}}
}

// Assistant returns an assistant message with text (omitted when "") and
// tool calls.
func Assistant(text string, calls ...abi.Block) abi.Message {
	m := abi.Message{Role: abi.RoleAssistant}
	if text != "" {
		m.Content = append(m.Content, abi.Block{Type: abi.BlockText, Text: text})
	}
	m.Content = append(m.Content, calls...)
	return m
}

// Call returns a tool_use block whose input is args encoded as JSON.
func Call(id, name string, args any) abi.Block {
	in, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return abi.Block{Type: abi.BlockToolUse, ID: id, Name: name, Input: in}
}

// Result returns a user message holding one tool_result.
func Result(id, text string, isError bool) abi.Message {
	return abi.Message{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: id, Text: text, IsError: isError}}}
}

// Args is a tool input.
type Args = map[string]any

// Session is a small coding session in canonical form: two requests, file
// reads and edits, a failing then passing test run, stated decisions and
// open items. Every ID is stable, so outputs derived from it are golden.
func Session() []abi.Message {
	msgs := []abi.Message{
		User("The CLI crashes with a nil pointer when --config points to a missing file. Fix it and add a test. Don't change the public API of package config."),
		Assistant("I'll look at the config loader first.", Call("t1", "Read", Args{"file_path": "internal/config/load.go"})),
		Result("t1", "package config\n\nfunc Load(path string) (*Config, error) {\n\tf, err := os.Open(path)\n\tif err != nil {\n\t\treturn nil, nil\n\t}\n\tdefer f.Close()\n\treturn decode(f)\n}\n", false),
		Assistant("", Call("t2", "Bash", Args{"command": "go test ./internal/config/...", "description": "run the config tests"})),
		Result("t2", "--- FAIL: TestLoadMissing (0.00s)\npanic: runtime error: invalid memory address or nil pointer dereference [recovered]\nFAIL\tgithub.com/acme/app/internal/config\t0.012s\nFAIL", true),
		Assistant("The root cause is that Load returns a nil *Config with a nil error when os.Open fails. I decided to return the error wrapped with %w instead of exiting, because every caller already checks it.",
			Call("t3", "Edit", Args{"file_path": "internal/config/load.go", "old_string": "return nil, nil", "new_string": "return nil, fmt.Errorf(\"config: open %s: %w\", path, err)"})),
		Result("t3", "The file internal/config/load.go has been updated.", false),
		Assistant("", Call("t4", "Write", Args{"file_path": "internal/config/load_test.go", "content": "package config\n\nfunc TestLoadMissing(t *testing.T) { /* … */ }\n"})),
		Result("t4", "File created successfully at: internal/config/load_test.go", false),
		Assistant("", Call("t5", "Bash", Args{"command": "go test ./internal/config/..."})),
		Result("t5", "ok  \tgithub.com/acme/app/internal/config\t0.015s", false),
		Assistant("The crash is fixed and TestLoadMissing passes. TODO: the same pattern exists in internal/plugin/registry.go, which still returns nil, nil."),
		User("Yes, fix internal/plugin/registry.go the same way, and keep the error messages lowercase."),
		Assistant("Let me find the call.", Call("t6", "Grep", Args{"pattern": "os.Open", "path": "internal/plugin"})),
		Result("t6", "internal/plugin/registry.go:42:\tf, err := os.Open(path)", false),
		Assistant("", Call("t7", "Bash", Args{"command": "sed -i 's/return nil, nil/return nil, err/' internal/plugin/registry.go && go vet ./internal/plugin/"})),
		Result("t7", "", false),
		Assistant("Next I'll add a test for the registry so this cannot regress."),
	}
	for i := range msgs {
		msgs[i].ID = fmt.Sprintf("m%02d", i+1)
	}
	return msgs
}

// TurnPrefix is the start of one long turn: a request and the first steps
// taken for it, the part a cut inside the turn folds.
func TurnPrefix() []abi.Message {
	msgs := []abi.Message{
		User("Rename the package util to textutil across the repository and make sure go build ./... passes."),
		Assistant("I'll list the importers first.", Call("p1", "Bash", Args{"command": "grep -rl '\"acme/app/util\"' --include=*.go ."})),
		Result("p1", "./cmd/app/main.go\n./internal/render/render.go", false),
		Assistant("", Call("p2", "Bash", Args{"command": "git mv util textutil"})),
		Result("p2", "", false),
		Assistant("", Call("p3", "Edit", Args{"file_path": "cmd/app/main.go", "old_string": "acme/app/util", "new_string": "acme/app/textutil"})),
		Result("p3", "The file cmd/app/main.go has been updated.", false),
		Assistant("", Call("p4", "Bash", Args{"command": "go build ./..."})),
		Result("p4", "internal/render/render.go:7:2: package acme/app/util is not in std\nexit status 1", true),
	}
	for i := range msgs {
		msgs[i].ID = fmt.Sprintf("p%02d", i+1)
	}
	return msgs
}

// PreviousSummary is a six-section summary of an earlier compaction of
// the same project, to merge.
const PreviousSummary = `## Active Task
> Add a --config flag to the CLI that loads settings from a YAML file.

## Key Decisions & Rationale
- Settings are decoded with gopkg.in/yaml.v3 because the project already depends on it.

## Files & Artifacts
Modified:
- ` + "`cmd/app/flags.go`" + `
- ` + "`internal/config/load.go`" + `
Read:
- ` + "`go.mod`" + `

## Constraints & Requirements
- Keep Go 1.22 compatibility.

## Pending Items
- Document the flag in README.md.

## Session Narrative
1. User: “Add a --config flag to the CLI that loads settings from a YAML file.” Tools: Edit ×2. Modified ` + "`cmd/app/flags.go`, `internal/config/load.go`" + `.
`

// LongSession is Session repeated, with fresh IDs and numbered requests,
// until it holds n messages: the long session the strategies' speed is
// measured on.
func LongSession(n int) []abi.Message {
	base := Session()
	out := make([]abi.Message, 0, n+len(base))
	for rep := 0; len(out) < n; rep++ {
		for _, m := range base {
			m.ID = fmt.Sprintf("r%d-%s", rep, m.ID)
			m.Content = append([]abi.Block(nil), m.Content...)
			for i := range m.Content {
				b := &m.Content[i]
				switch b.Type {
				case abi.BlockToolUse:
					b.ID = fmt.Sprintf("r%d-%s", rep, b.ID)
				case abi.BlockToolResult:
					b.ToolUseID = fmt.Sprintf("r%d-%s", rep, b.ToolUseID)
				case abi.BlockText:
					if m.Role == abi.RoleUser {
						b.Text = fmt.Sprintf("Step %d. %s", rep, b.Text)
					}
				}
			}
			out = append(out, m)
		}
	}
	return out[:n]
}
