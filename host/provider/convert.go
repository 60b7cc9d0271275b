package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// prompt is a request reduced to what both APIs take the same way: a
// system prompt and alternating text turns.
type prompt struct {
	system string
	turns  []turn
}

type turn struct {
	role string // abi.RoleUser or abi.RoleAssistant
	text string
}

// render converts a CompleteRequest. System-role messages join the system
// prompt. Consecutive messages of one role are merged, as Anthropic would
// merge them anyway, and messages with no content are dropped, since
// Anthropic rejects empty text blocks. Roles other than assistant are sent
// as user.
func render(req *abi.CompleteRequest) prompt {
	var p prompt
	var system []string
	if s := strings.TrimSpace(req.System); s != "" {
		system = append(system, s)
	}
	for _, m := range req.Messages {
		text := renderBlocks(m.Content)
		if strings.TrimSpace(text) == "" {
			continue
		}
		role := abi.RoleUser
		switch m.Role {
		case abi.RoleSystem:
			system = append(system, text)
			continue
		case abi.RoleAssistant:
			role = abi.RoleAssistant
		}
		if n := len(p.turns); n > 0 && p.turns[n-1].role == role {
			p.turns[n-1].text += "\n\n" + text
			continue
		}
		p.turns = append(p.turns, turn{role: role, text: text})
	}
	p.system = strings.Join(system, "\n\n")
	return p
}

// renderBlocks renders content blocks as text. A summarization call sends
// no tool definitions, so tool calls and results cannot be sent as tool
// blocks (both APIs reject a tool_use without the tool); as text the model
// still sees what was called and what came back. Thinking blocks are left
// out: they are the model's scratch work, which Anthropic itself strips
// from earlier turns, and would only cost tokens. Images are replaced by a
// note.
func renderBlocks(blocks []abi.Block) string {
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case abi.BlockText, "":
			if b.Text != "" {
				parts = append(parts, b.Text)
			}
		case abi.BlockThinking:
		case abi.BlockToolUse:
			parts = append(parts, fmt.Sprintf("[tool call %s id=%s] %s", b.Name, b.ID, compactJSON(b.Input)))
		case abi.BlockToolResult:
			status := ""
			if b.IsError {
				status = " error"
			}
			parts = append(parts, fmt.Sprintf("[tool result id=%s%s] %s", b.ToolUseID, status, b.Text))
		case abi.BlockImage:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes, not shown]", b.MediaType, len(b.Data)))
		default:
			parts = append(parts, fmt.Sprintf("[%s block, not shown]", b.Type))
		}
	}
	return strings.Join(parts, "\n")
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
