package formats

import (
	"bufio"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

type opencodeTokens struct {
	Input     int `json:"input"`
	Output    int `json:"output"`
	Reasoning int `json:"reasoning"`
	Cache     struct {
		Read  int `json:"read"`
		Write int `json:"write"`
	} `json:"cache"`
}

func (t *opencodeTokens) usage() *abi.Usage {
	if t == nil {
		return nil
	}
	return &abi.Usage{InputTokens: t.Input, OutputTokens: t.Output + t.Reasoning, CacheReadTokens: t.Cache.Read, CacheWriteTokens: t.Cache.Write}
}

type opencodeMessage struct {
	Info struct {
		ID      string          `json:"id"`
		Role    string          `json:"role"`
		Summary json.RawMessage `json:"summary"` // true on a compaction's summary; an object on user messages
		Tokens  *opencodeTokens `json:"tokens"`
	} `json:"info"`
	Parts []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Synthetic bool            `json:"synthetic"`
		Ignored   bool            `json:"ignored"`
		Tool      string          `json:"tool"`
		CallID    string          `json:"callID"`
		Tokens    *opencodeTokens `json:"tokens"`
		Files     []string        `json:"files"`
		Filename  string          `json:"filename"`
		URL       string          `json:"url"`
		State     struct {
			Status string          `json:"status"`
			Input  json.RawMessage `json:"input"`
			Output string          `json:"output"`
			Error  string          `json:"error"`
		} `json:"state"`
	} `json:"parts"`
}

// readOpenCode reads an opencode session export ("opencode export"):
// {"info": {...}, "messages": [{"info", "parts"}]}. Each step of an
// assistant message (parts from one step-start to the next) is one model
// call: its reasoning parts become thinking, its text parts text and its
// tool parts tool_use blocks, with their outputs (or errors) as tool results
// in a user message after it. The step-finish tokens become the Usage of
// that call (input, cache reads and writes as recorded, reasoning counted
// as output). Patch parts (the files a step changed) and snapshots carry
// nothing the model saw and are skipped; a file part the user attached is
// kept as a one-line note. An assistant message marked summary is
// opencode's own compaction.
func readOpenCode(r *bufio.Reader, s *Session) error {
	var doc struct {
		Messages []opencodeMessage `json:"messages"`
	}
	if _, err := readDoc(r, OpenCode, &doc); err != nil {
		return err
	}
	var msgs []abi.Message
	for i, m := range doc.Messages {
		id := m.Info.ID
		if id == "" {
			id = OpenCode + "-" + strconv.Itoa(i)
		}
		switch m.Info.Role {
		case abi.RoleUser:
			var blocks []abi.Block
			for _, p := range m.Parts {
				switch {
				case p.Type == "text" && !p.Ignored && p.Text != "":
					blocks = append(blocks, abi.Block{Type: abi.BlockText, Text: p.Text})
				case p.Type == "file":
					name := p.Filename
					if name == "" {
						name = p.URL
					}
					blocks = append(blocks, abi.Block{Type: abi.BlockText, Text: "[file: " + name + "]"})
				default:
					s.Skipped["part/"+p.Type]++
				}
			}
			msgs = append(msgs, abi.Message{ID: id, Role: abi.RoleUser, Content: blocks})
		case abi.RoleAssistant:
			if strings.TrimSpace(string(m.Info.Summary)) == "true" {
				var text []string
				for _, p := range m.Parts {
					if p.Type == "text" {
						text = append(text, p.Text)
					}
				}
				s.AgentCompactions = append(s.AgentCompactions, AgentCompaction{ID: id, Summary: strings.Join(text, "\n"), FirstKept: len(msgs)})
				continue
			}
			var blocks, results []abi.Block
			var usage *abi.Usage
			step := 0
			flush := func() {
				if len(blocks) > 0 {
					msgID := id
					if step > 0 {
						msgID += "-step-" + strconv.Itoa(step)
					}
					msgs = append(msgs, abi.Message{ID: msgID, Role: abi.RoleAssistant, Content: blocks, Usage: usage})
					if len(results) > 0 {
						msgs = append(msgs, abi.Message{ID: msgID + "-results", Role: abi.RoleUser, Content: results})
					}
					step++
				}
				blocks, results, usage = nil, nil, nil
			}
			for k, p := range m.Parts {
				switch p.Type {
				case "step-start":
					flush()
				case "step-finish":
					usage = p.Tokens.usage()
				case "reasoning":
					if p.Text != "" {
						blocks = append(blocks, abi.Block{Type: abi.BlockThinking, Text: p.Text})
					}
				case "text":
					if p.Text != "" {
						blocks = append(blocks, abi.Block{Type: abi.BlockText, Text: p.Text})
					}
				case "tool":
					callID := p.CallID
					if callID == "" {
						callID = id + "-tool-" + strconv.Itoa(k)
					}
					blocks = append(blocks, abi.Block{Type: abi.BlockToolUse, ID: callID, Name: p.Tool, Input: objectInput(p.State.Input)})
					switch p.State.Status {
					case "completed":
						results = append(results, abi.Block{Type: abi.BlockToolResult, ToolUseID: callID, Text: p.State.Output})
					case "error":
						results = append(results, abi.Block{Type: abi.BlockToolResult, ToolUseID: callID, Text: p.State.Error, IsError: true})
					}
					// A pending or running call has no result: normalize
					// marks it interrupted.
				default:
					s.Skipped["part/"+p.Type]++
				}
			}
			if usage == nil {
				usage = m.Info.Tokens.usage()
			}
			flush()
		default:
			s.Skipped["role/"+m.Info.Role]++
		}
	}
	finish(s, msgs, OpenCode)
	return nil
}
