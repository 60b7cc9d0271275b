package digest

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
)

// Call is one tool call of a conversation, with its result when the folded
// messages hold it.
type Call struct {
	// Index is the position of the message holding the tool_use.
	Index int
	ID    string
	Name  string
	// tool is Name in lower case, as the digest compares names: lowering
	// it at each comparison was an allocation each time.
	tool string
	// Input holds the members of a tool input that is a JSON object:
	// strings, arrays as the []any of their string elements (others nil),
	// every other value nil. Nil for any other input.
	Input map[string]any
	// RawInput is the input when it is a bare JSON string (a patch, for
	// example), else "".
	RawInput string
	// Command is the shell command the call ran, if it is one.
	Command string
	// Raw is the input as it came, for the few tools whose nested
	// arrays of objects the digest reads (plans, todo lists, multi-edits).
	Raw    json.RawMessage
	Result *Result
}

// Result is a tool_result.
type Result struct {
	Index   int
	Text    string
	IsError bool
}

// Calls pairs every tool_use of msgs with its tool_result. An agent that
// writes its action as text (mini-swe-agent before tool calls, SWE-agent)
// has each shell block of an assistant message answered by an
// observation counted as a call named "bash", the observation its result.
func Calls(msgs []abi.Message) []Call {
	// Sized once from the tool uses: growing them call by call copied
	// every call again and again, and in a wasm plugin each pointer of a
	// copy is a write barrier while the collector marks.
	uses := 0
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == abi.BlockToolUse {
				uses++
			}
		}
	}
	calls := make([]Call, 0, uses)
	results := make([]Result, 0, uses)
	byID := make(map[string]int, uses)
	tools := map[string]string{} // tool names in lower case, lowered once each
	for i, m := range msgs {
		if c, ok := textAction(msgs, i); ok {
			calls = append(calls, c)
			continue
		}
		if m.Role == abi.RoleAssistant {
			calls = textEdits(calls, m, i)
		}
		for _, b := range m.Content {
			switch b.Type {
			case abi.BlockToolUse:
				tool, ok := tools[b.Name]
				if !ok {
					tool = strings.ToLower(b.Name)
					tools[b.Name] = tool
				}
				c := Call{Index: i, ID: b.ID, Name: b.Name, tool: tool, Raw: b.Input}
				decodeInput(&c, b.Input)
				if b.ID != "" {
					byID[b.ID] = len(calls)
				}
				calls = append(calls, c)
			case abi.BlockToolResult:
				if j, ok := byID[b.ToolUseID]; ok && calls[j].Result == nil {
					results = append(results, Result{Index: i, Text: b.Text, IsError: b.IsError})
					calls[j].Result = &results[len(results)-1]
				}
			}
		}
	}
	return calls
}

// textAction reads the action of msgs[i] when it is an assistant message
// without tool calls whose text holds a fenced shell block and the next
// message is an observation.
func textAction(msgs []abi.Message, i int) (Call, bool) {
	m := msgs[i]
	if m.Role != abi.RoleAssistant || !isObservation(msgs, i+1) {
		return Call{}, false
	}
	for _, b := range m.Content {
		if b.Type == abi.BlockToolUse {
			return Call{}, false
		}
	}
	cmd := shellBlock(m.Text())
	if cmd == "" {
		return Call{}, false
	}
	out := msgs[i+1].Text()
	failed := strings.HasPrefix(strings.TrimSpace(out), "<returncode>") && !strings.HasPrefix(strings.TrimSpace(out), "<returncode>0</returncode>")
	return Call{Index: i, Name: "bash", tool: "bash", Command: cmd, Result: &Result{Index: i + 1, Text: out, IsError: failed}}, true
}

// shellBlock returns the body of the last fenced block of text tagged
// bash, sh or shell, or untagged.
func shellBlock(text string) string {
	body := ""
	for rest := text; ; {
		i := strings.Index(rest, "```")
		if i < 0 {
			return body
		}
		rest = rest[i+3:]
		tag, after, ok := strings.Cut(rest, "\n")
		if !ok {
			return body
		}
		j := strings.Index(after, "```")
		if j < 0 {
			return body
		}
		switch strings.TrimSpace(tag) {
		case "bash", "sh", "shell", "":
			body = strings.TrimSpace(after[:j])
		}
		rest = after[j+3:]
	}
}

// decodeInput decodes a tool input as json.Unmarshal into an any would,
// keeping what the digest reads: an object's top-level members, with
// strings as strings, arrays as the []any of their string elements (other
// elements nil), anything else nil; or the input itself when it is a
// string or not JSON. A valid input is only scanned here, and a string
// with escapes or odd bytes is unquoted by encoding/json: its reflection
// into an any was the costliest part of a summary in a wasm build.
func decodeInput(c *Call, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	s := string(raw)
	if !decodable(s) {
		c.RawInput = s
		return
	}
	i := skipSpace(s, 0)
	switch s[i] {
	case '"':
		c.RawInput = unquoteJSON(s[i:stringEnd(s, i)])
	case '{':
		c.Input = objectMembers(s, i)
		aliasKeys(c.Input)
	}
	c.Command = commandOf(c.Input)
}

// inputAliases are other agents' names for the input members the digest
// reads (opencode's camelCase ones).
var inputAliases = [][2]string{
	{"filePath", "file_path"}, {"oldString", "old_string"}, {"newString", "new_string"},
}

// aliasKeys gives in the member names the digest reads where the agent
// spelled them otherwise: camelCase members, and the file of a Cline-
// family call whose arguments are XML in one string
// ("<file><path>src/a.ts</path>…").
func aliasKeys(in map[string]any) {
	for _, a := range inputAliases {
		if v, ok := in[a[0]]; ok {
			if _, taken := in[a[1]]; !taken {
				in[a[1]] = v
			}
		}
	}
	if args, ok := in["args"].(string); ok {
		if _, taken := in["path"]; !taken {
			if _, rest, ok := strings.Cut(args, "<path>"); ok {
				if p, _, ok := strings.Cut(rest, "</path>"); ok && strings.TrimSpace(p) != "" {
					in["path"] = strings.TrimSpace(p)
				}
			}
		}
	}
}

// objectMembers reads the members of the valid JSON object at s[i]. A
// repeated key keeps its last value, as in encoding/json.
func objectMembers(s string, i int) map[string]any {
	m := map[string]any{}
	i = skipSpace(s, i+1)
	for s[i] != '}' {
		end := stringEnd(s, i)
		key := unquoteJSON(s[i:end])
		i = skipSpace(s, skipSpace(s, end)+1) // past the colon
		var v any
		switch s[i] {
		case '"':
			end = stringEnd(s, i)
			v = unquoteJSON(s[i:end])
		case '[':
			var elems []any
			end = skipSpace(s, i+1)
			for s[end] != ']' {
				var e any
				j := valueEnd(s, end)
				if s[end] == '"' {
					e = unquoteJSON(s[end:j])
				}
				elems = append(elems, e)
				if end = skipSpace(s, j); s[end] == ',' {
					end = skipSpace(s, end+1)
				}
			}
			v, end = elems, end+1
			if elems == nil {
				v = []any{}
			}
		default:
			end = valueEnd(s, i)
		}
		m[key] = v
		if i = skipSpace(s, end); s[i] == ',' {
			i = skipSpace(s, i+1)
		}
	}
	return m
}

// unquoteJSON returns the value of a valid JSON string token, as
// encoding/json unquotes it: escapes decoded, a lone or broken surrogate
// and each byte of invalid UTF-8 replaced by U+FFFD.
func unquoteJSON(tok string) string {
	body := tok[1 : len(tok)-1]
	if !strings.Contains(body, `\`) && utf8.ValidString(body) {
		return body
	}
	var b strings.Builder
	b.Grow(len(body))
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
			switch e := body[i+1]; e {
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r := hex4(body[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					if dec := utf16.DecodeRune(r, escapedRune(body[i:])); dec != unicode.ReplacementChar {
						b.WriteRune(dec)
						i += 6
						continue
					}
					r = unicode.ReplacementChar
				}
				b.WriteRune(r)
				continue
			default: // " \ /
				b.WriteByte(e)
			}
			i += 2
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(body[i:])
			b.WriteRune(r) // RuneError for an invalid byte
			i += size
		}
	}
	return b.String()
}

// escapedRune returns the rune of a \uXXXX escape at the start of s, or -1.
func escapedRune(s string) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	return hex4(s[2:])
}

// hex4 returns the value of the four hex digits that start s, or -1.
func hex4(s string) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// maxJSONDepth is encoding/json's bound on nested arrays and objects.
const maxJSONDepth = 10000

// decodable reports whether json.Unmarshal into an any accepts s: s is
// one valid JSON value, nested at most maxJSONDepth deep, whose numbers
// all fit a float64 (1e400 is valid JSON that it refuses).
func decodable(s string) bool {
	i, ok := scanValue(s, skipSpace(s, 0), 0)
	return ok && skipSpace(s, i) == len(s)
}

// scanValue checks the JSON value at s[i], inside depth arrays and
// objects, and returns its end.
func scanValue(s string, i, depth int) (int, bool) {
	if i >= len(s) {
		return i, false
	}
	switch c := s[i]; {
	case c == '{' || c == '[':
		if depth == maxJSONDepth {
			return i, false
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		if i = skipSpace(s, i+1); i < len(s) && s[i] == closing {
			return i + 1, true
		}
		for {
			var ok bool
			if closing == '}' {
				if i >= len(s) || s[i] != '"' {
					return i, false
				}
				if i, ok = scanString(s, i); !ok {
					return i, false
				}
				if i = skipSpace(s, i); i >= len(s) || s[i] != ':' {
					return i, false
				}
				i = skipSpace(s, i+1)
			}
			if i, ok = scanValue(s, i, depth+1); !ok {
				return i, false
			}
			switch i = skipSpace(s, i); {
			case i < len(s) && s[i] == ',':
				i = skipSpace(s, i+1)
			case i < len(s) && s[i] == closing:
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '"':
		return scanString(s, i)
	case c == '-' || '0' <= c && c <= '9':
		return scanNumber(s, i)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if strings.HasPrefix(s[i:], lit) {
			return i + len(lit), true
		}
	}
	return i, false
}

// scanString checks the JSON string at s[i] and returns its end. Bytes of
// invalid UTF-8 are allowed, as encoding/json allows them.
func scanString(s string, i int) (int, bool) {
	for i++; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return i + 1, true
		case c < ' ':
			return i, false
		case c == '\\':
			if i+1 >= len(s) {
				return i, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if hex4(s[i+2:]) < 0 {
					return i, false
				}
				i += 5
			default:
				return i, false
			}
		}
	}
	return i, false
}

// scanNumber checks the JSON number at s[i], and that it fits a float64,
// and returns its end.
func scanNumber(s string, i int) (int, bool) {
	start := i
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = digits(s, i)
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(s, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(s, i)
		if j == i {
			return j, false
		}
		i = j
	}
	_, err := strconv.ParseFloat(s[start:i], 64)
	return i, err == nil
}

// skipSpace skips JSON white space from s[i].
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the end of the valid JSON string token at s[i].
func stringEnd(s string, i int) int {
	for i++; ; i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// valueEnd returns the end of the valid JSON value at s[i].
func valueEnd(s string, i int) int {
	switch s[i] {
	case '"':
		return stringEnd(s, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch s[i] {
			case '"':
				i = stringEnd(s, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(s) && !strings.ContainsRune(",}] \t\n\r", rune(s[i])) {
		i++
	}
	return i
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
	switch c.tool {
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
