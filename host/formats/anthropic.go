package formats

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/compact-host/compact-host/abi"
)

type anthropicDoc struct {
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

func readAnthropic(r *bufio.Reader, s *Session) error {
	var doc anthropicDoc
	_, err := readDoc(r, Anthropic, &doc)
	if err != nil {
		return err
	}
	var msgs []abi.Message
	if len(doc.System) > 0 {
		blocks, err := apiContent(doc.System, s.Skipped)
		if err != nil {
			return &ParseError{Offset: -1, Format: Anthropic, Reason: "system: " + jsonReason(err), Err: err}
		}
		if len(blocks) > 0 {
			msgs = append(msgs, abi.Message{ID: Anthropic + "-system", Role: abi.RoleSystem, Content: blocks})
		}
	}
	for i, m := range doc.Messages {
		if m.Role != abi.RoleUser && m.Role != abi.RoleAssistant {
			s.Skipped["role/"+m.Role]++
			continue
		}
		blocks, err := apiContent(m.Content, s.Skipped)
		if err != nil {
			return &ParseError{Offset: -1, Format: Anthropic,
				Reason: fmt.Sprintf("messages[%d].content: %s", i, jsonReason(err)), Err: err}
		}
		msgs = append(msgs, abi.Message{ID: Anthropic + "-" + strconv.Itoa(i), Role: m.Role, Content: blocks})
	}
	finish(s, msgs, Anthropic)
	pinLeadingSystem(s.Messages)
	return nil
}

// Anthropic request shapes, in the order the API documents their fields.
type (
	anthropicOut struct {
		System   any               `json:"system,omitempty"`
		Messages []anthropicOutMsg `json:"messages"`
	}
	anthropicOutMsg struct {
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	anthropicText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	anthropicThinking struct {
		Type     string `json:"type"`
		Thinking string `json:"thinking"`
	}
	anthropicToolUse struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	anthropicToolResult struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		Content   string `json:"content"`
		IsError   bool   `json:"is_error,omitempty"`
	}
	anthropicImage struct {
		Type   string `json:"type"`
		Source struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      []byte `json:"data"`
		} `json:"source"`
	}
)

// writeAnthropic writes a Messages API request body. The system messages
// that open the conversation become "system" (a string when there is one
// text block); a system message later in the conversation is written as a
// user message. Message IDs, Usage, the Summary flag and the Pinned flag of
// non-system messages are not expressible and are lost; thinking blocks are
// written without a signature.
func writeAnthropic(w io.Writer, msgs []abi.Message) error {
	var out anthropicOut
	out.Messages = make([]anthropicOutMsg, 0, len(msgs))
	var system []anthropicText
	i := 0
	for ; i < len(msgs) && msgs[i].Role == abi.RoleSystem; i++ {
		for _, b := range msgs[i].Content {
			if b.Type == abi.BlockText {
				system = append(system, anthropicText{Type: "text", Text: b.Text})
			}
		}
	}
	switch len(system) {
	case 0:
	case 1:
		out.System = system[0].Text
	default:
		out.System = system
	}
	for _, m := range msgs[i:] {
		role := m.Role
		if role == abi.RoleSystem {
			role = abi.RoleUser
		}
		om := anthropicOutMsg{Role: role, Content: make([]any, 0, len(m.Content))}
		for _, b := range m.Content {
			switch b.Type {
			case abi.BlockText:
				om.Content = append(om.Content, anthropicText{Type: "text", Text: b.Text})
			case abi.BlockThinking:
				om.Content = append(om.Content, anthropicThinking{Type: "thinking", Thinking: b.Text})
			case abi.BlockToolUse:
				input := b.Input
				if len(input) == 0 {
					input = json.RawMessage("{}")
				}
				om.Content = append(om.Content, anthropicToolUse{Type: "tool_use", ID: b.ID, Name: b.Name, Input: input})
			case abi.BlockToolResult:
				om.Content = append(om.Content, anthropicToolResult{Type: "tool_result", ToolUseID: b.ToolUseID, Content: b.Text, IsError: b.IsError})
			case abi.BlockImage:
				img := anthropicImage{Type: "image"}
				img.Source.Type = "base64"
				img.Source.MediaType = b.MediaType
				img.Source.Data = b.Data
				om.Content = append(om.Content, img)
			}
		}
		out.Messages = append(out.Messages, om)
	}
	return encodeDoc(w, out)
}

func encodeDoc(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	return enc.Encode(v)
}
