package digest

import (
	"encoding/json"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// Call is one tool call of a conversation, with its result when the folded
// messages hold it.
type Call struct {
	// Index is the position of the message holding the tool_use.
	Index int
	ID    string
	Name  string
	// Input is the decoded tool input: an object's fields, or nil.
	Input map[string]any
	// RawInput is the input when it is a bare JSON string (a patch, for
	// example), else "".
	RawInput string
	// Command is the shell command the call ran, if it is one.
	Command string
	Result  *Result
}

// Result is a tool_result.
type Result struct {
	Index   int
	Text    string
	IsError bool
}

// Calls pairs every tool_use of msgs with its tool_result.
func Calls(msgs []abi.Message) []Call {
	var calls []Call
	byID := map[string]int{}
	for i, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case abi.BlockToolUse:
				c := Call{Index: i, ID: b.ID, Name: b.Name}
				decodeInput(&c, b.Input)
				if b.ID != "" {
					byID[b.ID] = len(calls)
				}
				calls = append(calls, c)
			case abi.BlockToolResult:
				if j, ok := byID[b.ToolUseID]; ok && calls[j].Result == nil {
					calls[j].Result = &Result{Index: i, Text: b.Text, IsError: b.IsError}
				}
			}
		}
	}
	return calls
}

func decodeInput(c *Call, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		c.RawInput = string(raw)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		c.Input = x
	case string:
		c.RawInput = x
	}
	c.Command = commandOf(c.Input)
}

// commandOf finds a shell command in a tool input: "command" or "cmd" as a
// string, or as an argv whose last element is the script ("bash -lc …").
func commandOf(in map[string]any) string {
	for _, k := range []string{"command", "cmd", "script"} {
		switch v := in[k].(type) {
		case string:
			return v
		case []any:
			if len(v) > 0 {
				if s, ok := v[len(v)-1].(string); ok {
					return s
				}
			}
		}
	}
	return ""
}

// Str returns the string field key of the input, or "".
func (c Call) Str(key string) string {
	s, _ := c.Input[key].(string)
	return s
}

// Path returns the file the call names, if any.
func (c Call) Path() string {
	for _, k := range []string{"file_path", "notebook_path", "path", "filename", "target_file", "file"} {
		if s := c.Str(k); s != "" {
			return s
		}
	}
	return ""
}

// IsShell reports whether the call ran a shell command.
func (c Call) IsShell() bool {
	if c.Command == "" {
		return false
	}
	switch strings.ToLower(c.Name) {
	case "str_replace_editor", "str_replace_based_edit_tool":
		return false // "command" is the editor's verb
	}
	return true
}

// Brief describes the call on one line: its name and its most telling
// argument (the command, the path or the pattern), clipped to max bytes.
func (c Call) Brief(max int) string {
	arg := ""
	switch {
	case c.IsShell():
		arg = c.Command
	case c.Path() != "":
		arg = c.Path()
	case c.Str("pattern") != "":
		arg = c.Str("pattern")
	case c.Str("query") != "":
		arg = c.Str("query")
	case c.RawInput != "":
		arg = c.RawInput
	}
	if arg == "" {
		return c.Name
	}
	return ClipHead(c.Name+" "+OneLine(arg), max)
}
