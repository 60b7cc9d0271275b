package formats

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/compact-host/compact-host/abi"
)

type copilotEvent struct {
	Type string          `json:"type"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

type copilotData struct {
	Content            string `json:"content"`
	TransformedContent string `json:"transformedContent"`
	ReasoningText      string `json:"reasoningText"`
	ToolRequests       []struct {
		ToolCallID string          `json:"toolCallId"`
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
	} `json:"toolRequests"`
	ToolCallID string `json:"toolCallId"`
	Success    bool   `json:"success"`
	Result     *struct {
		Content string `json:"content"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// readCopilot reads a GitHub Copilot CLI events file. The system prompt is
// recorded again before each user message; a repeat identical to the last
// one is skipped. User messages are taken as the model saw them
// (transformedContent). tool.execution_complete events become the tool
// results of the calls in assistant.message toolRequests, matched by
// toolCallId; the other events (turn, hook and tool start events, session
// metadata) are skipped.
func readCopilot(r *bufio.Reader, s *Session) error {
	var msgs []abi.Message
	results := -1
	lastSystem := ""
	err := readJSONL(r, Copilot, func(line []byte, n int) error {
		var ev copilotEvent
		if err := decode(line, &ev); err != nil {
			return err
		}
		id := ev.ID
		if id == "" {
			id = Copilot + "-" + strconv.Itoa(n)
		}
		var d copilotData
		switch ev.Type {
		case "system.message", "user.message", "assistant.message", "tool.execution_complete":
			if len(ev.Data) == 0 || ev.Data[0] != '{' {
				return fmt.Errorf("%s event: expected a JSON object in \"data\"", ev.Type)
			}
			if err := decodeChecked(ev.Data, &d); err != nil {
				return fmt.Errorf("%s data: %s", ev.Type, jsonReason(err))
			}
		case "":
			return errors.New(`expected an event with a "type"`)
		default:
			s.Skipped[ev.Type]++
			return nil
		}
		text := func(s string) []abi.Block {
			if s == "" {
				return nil
			}
			return []abi.Block{{Type: abi.BlockText, Text: s}}
		}
		switch ev.Type {
		case "system.message":
			if d.Content == lastSystem {
				s.Skipped["system.message (repeated)"]++
				return nil
			}
			lastSystem = d.Content
			results = -1
			msgs = append(msgs, abi.Message{ID: id, Role: abi.RoleSystem, Content: text(d.Content)})
		case "user.message":
			content := d.TransformedContent
			if content == "" {
				content = d.Content
			}
			results = -1
			msgs = append(msgs, abi.Message{ID: id, Role: abi.RoleUser, Content: text(content)})
		case "assistant.message":
			var blocks []abi.Block
			if d.ReasoningText != "" {
				blocks = append(blocks, abi.Block{Type: abi.BlockThinking, Text: d.ReasoningText})
			}
			blocks = append(blocks, text(d.Content)...)
			for _, t := range d.ToolRequests {
				blocks = append(blocks, abi.Block{Type: abi.BlockToolUse, ID: t.ToolCallID, Name: t.Name, Input: objectInput(t.Arguments)})
			}
			results = -1
			msgs = append(msgs, abi.Message{ID: id, Role: abi.RoleAssistant, Content: blocks})
		case "tool.execution_complete":
			res := abi.Block{Type: abi.BlockToolResult, ToolUseID: d.ToolCallID, IsError: !d.Success}
			if d.Result != nil {
				res.Text = d.Result.Content
			}
			if d.Error != nil && d.Error.Message != "" {
				if res.Text != "" {
					res.Text += "\n"
				}
				res.Text += d.Error.Message
			}
			if results < 0 {
				msgs = append(msgs, abi.Message{ID: id, Role: abi.RoleUser})
				results = len(msgs) - 1
			}
			msgs[results].Content = append(msgs[results].Content, res)
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrTornLine) {
		return err
	}
	finish(s, msgs, Copilot)
	pinLeadingSystem(s.Messages)
	return err
}
