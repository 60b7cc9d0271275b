package formats

import (
	"bufio"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// clineMessage is one entry of a Cline, Roo Code or Kilo Code
// api_conversation_history.json: an Anthropic MessageParam plus the
// extension's own members.
type clineMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	IsSummary bool            `json:"isSummary"`
}

// readCline reads a Cline / Roo Code / Kilo Code task history
// (api_conversation_history.json), the messages the extension sends to the
// model. These agents call tools by writing one XML element at the end of
// the assistant's text (<read_file><path>x</path></read_file>) and answer
// with a user message whose first text block is "[read_file for 'x']
// Result:". Where both sides are there and the element's children parse,
// they become a tool_use (the children as string members of its input) and
// its tool_result (the text after "Result:" and the text blocks up to the
// next <environment_details> block); anything else stays text as written.
//
// A message with isSummary is the agent's own condensation: it becomes an
// AgentCompaction, not a message. The history keeps the first message,
// the summary and what came after; the first message is the compaction's
// Replacement, so Live holds all the agent sends (with the summary before
// that first message, where the agent sends it after it: Live puts a
// summary before the replacement history, as Codex sends it).
func readCline(r *bufio.Reader, s *Session) error {
	var doc []clineMessage
	if _, err := readJSONDoc(r, Cline, &doc, '['); err != nil {
		return err
	}
	msgs := make([]abi.Message, 0, len(doc))
	for i, m := range doc {
		id := Cline + "-" + strconv.Itoa(i)
		blocks, err := apiContent(m.Content, s.Skipped)
		if err != nil {
			return &ParseError{Offset: -1, Format: Cline, Reason: "message " + strconv.Itoa(i) + ": " + err.Error()}
		}
		if m.IsSummary {
			s.AgentCompactions = append(s.AgentCompactions, AgentCompaction{ID: id, Summary: textOf(blocks, abi.BlockText), FirstKept: len(msgs)})
			continue
		}
		switch m.Role {
		case abi.RoleUser, abi.RoleAssistant:
		default:
			s.Skipped["role/"+m.Role]++
			continue
		}
		msgs = append(msgs, abi.Message{ID: id, Role: m.Role, Content: blocks})
	}
	pairXMLTools(msgs)
	finish(s, msgs, Cline)
	// The agent sends its first message (the task) before each summary.
	for i := range s.AgentCompactions {
		c := &s.AgentCompactions[i]
		if c.FirstKept > 0 && Validate(s.Messages[:1]) == nil {
			c.Replacement = []abi.Message{s.Messages[0]}
		}
	}
	return nil
}

// pairXMLTools turns each XML tool call at the end of an assistant message
// and the result header of the user message after it into a tool_use and
// its tool_result, where that can be done exactly.
func pairXMLTools(msgs []abi.Message) {
	for i := 0; i+1 < len(msgs); i++ {
		a, u := &msgs[i], &msgs[i+1]
		if a.Role != abi.RoleAssistant || u.Role != abi.RoleUser || len(u.Content) == 0 || u.Content[0].Type != abi.BlockText {
			continue
		}
		name, rest, ok := resultHeader(u.Content[0].Text)
		if !ok {
			continue
		}
		k, before, input, after, ok := findXMLCall(a.Content, name)
		if !ok {
			continue
		}
		callID := a.ID + "-" + name
		call := abi.Block{Type: abi.BlockToolUse, ID: callID, Name: name, Input: input}
		var content []abi.Block
		content = append(content, a.Content[:k]...)
		if strings.TrimSpace(before) != "" {
			content = append(content, abi.Block{Type: abi.BlockText, Text: before})
		}
		content = append(content, call)
		if strings.TrimSpace(after) != "" {
			content = append(content, abi.Block{Type: abi.BlockText, Text: after})
		}
		a.Content = append(content, a.Content[k+1:]...)

		parts := []string{}
		if rest != "" {
			parts = append(parts, rest)
		}
		j := 1
		for ; j < len(u.Content); j++ {
			b := u.Content[j]
			if b.Type != abi.BlockText || strings.HasPrefix(b.Text, "<environment_details>") {
				break
			}
			parts = append(parts, b.Text)
		}
		res := abi.Block{Type: abi.BlockToolResult, ToolUseID: callID, Text: strings.Join(parts, "\n")}
		u.Content = append([]abi.Block{res}, u.Content[j:]...)
		i++
	}
}

// resultHeader reads "[name ...] Result:" at the start of a user message's
// first block: the tool's name and the text after the header.
func resultHeader(text string) (name, rest string, ok bool) {
	if !strings.HasPrefix(text, "[") {
		return "", "", false
	}
	end := strings.Index(text, "] Result:")
	if end < 0 {
		return "", "", false
	}
	head := text[1:end]
	name, _, _ = strings.Cut(head, " ")
	if !isXMLName(name) {
		return "", "", false
	}
	rest = strings.TrimLeft(text[end+len("] Result:"):], " \n")
	return name, rest, true
}

func isXMLName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// findXMLCall finds the call <name>...</name> in the last text block of an
// assistant's content that holds one, starting a line: the block's index,
// the text around the element and its children as a JSON object of strings.
func findXMLCall(content []abi.Block, name string) (k int, before string, input json.RawMessage, after string, ok bool) {
	open, closing := "<"+name+">", "</"+name+">"
	for k = len(content) - 1; k >= 0; k-- {
		b := content[k]
		if b.Type != abi.BlockText {
			continue
		}
		start := -1
		for off := 0; ; {
			at := strings.Index(b.Text[off:], open)
			if at < 0 {
				break
			}
			at += off
			if at == 0 || b.Text[at-1] == '\n' {
				start = at
				break
			}
			off = at + len(open)
		}
		if start < 0 {
			continue
		}
		bodyStart := start + len(open)
		end := strings.Index(b.Text[bodyStart:], closing)
		if end < 0 {
			return 0, "", nil, "", false
		}
		end += bodyStart
		params, ok := xmlParams(b.Text[bodyStart:end])
		if !ok {
			return 0, "", nil, "", false
		}
		in, err := json.Marshal(params)
		if err != nil {
			return 0, "", nil, "", false
		}
		return k, b.Text[:start], in, b.Text[end+len(closing):], true
	}
	return 0, "", nil, "", false
}

// xmlParams reads the children <p>value</p> of a call's body, with nothing
// but white space between them. A value keeps its text as written, less
// one newline on each side; nested elements stay text within it.
func xmlParams(body string) (map[string]string, bool) {
	params := map[string]string{}
	for {
		body = strings.TrimLeft(body, " \t\r\n")
		if body == "" {
			return params, true
		}
		if body[0] != '<' {
			return nil, false
		}
		gt := strings.IndexByte(body, '>')
		if gt < 0 {
			return nil, false
		}
		name := body[1:gt]
		if !isXMLName(name) {
			return nil, false
		}
		if _, dup := params[name]; dup {
			return nil, false
		}
		closing := "</" + name + ">"
		end := strings.Index(body[gt+1:], closing)
		if end < 0 {
			return nil, false
		}
		v := body[gt+1 : gt+1+end]
		v = strings.TrimPrefix(strings.TrimPrefix(v, "\r"), "\n")
		v = strings.TrimSuffix(strings.TrimSuffix(v, "\n"), "\r")
		params[name] = v
		body = body[gt+1+end+len(closing):]
	}
}
