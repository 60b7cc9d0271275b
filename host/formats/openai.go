package formats

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// oaMessage is a Chat Completions message, also the message form of
// mini-swe-agent and (with extra fields) SWE-agent.
type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []oaToolCall    `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	// FunctionCall is the legacy single call, answered by a "function"
	// role message.
	FunctionCall *oaFunction `json:"function_call"`
	// ReasoningContent carries reasoning text (DeepSeek, vLLM and others).
	ReasoningContent string `json:"reasoning_content"`
	// Usage is filled by readers whose source records it per message.
	Usage *abi.Usage `json:"-"`
}

type oaToolCall struct {
	ID       string     `json:"id"`
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"` // a string holding JSON; some writers put an object
}

// oaUsage is a Chat Completions usage report. prompt_tokens includes the
// cached tokens.
type oaUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u oaUsage) abi() *abi.Usage {
	cached := 0
	if u.PromptTokensDetails != nil {
		cached = min(u.PromptTokensDetails.CachedTokens, u.PromptTokens)
	}
	return &abi.Usage{InputTokens: u.PromptTokens - cached, CacheReadTokens: cached, OutputTokens: u.CompletionTokens}
}

// oaMessages converts Chat Completions messages. Consecutive tool messages
// form one user message of tool results. ids gives each source message's
// ID.
func oaMessages(in []oaMessage, ids func(i int) string, skipped map[string]int) ([]abi.Message, error) {
	var out []abi.Message
	results := -1 // index in out of the user message collecting tool results
	lastFunctionCall := ""
	for i, m := range in {
		var err error
		var blocks []abi.Block
		switch m.Role {
		case "system", "developer":
			results = -1
			if blocks, err = oaContent(m.Content, skipped); err != nil {
				return nil, fmt.Errorf("messages[%d].content: %s", i, jsonReason(err))
			}
			out = append(out, abi.Message{ID: ids(i), Role: abi.RoleSystem, Content: blocks})
		case "user":
			results = -1
			if blocks, err = oaContent(m.Content, skipped); err != nil {
				return nil, fmt.Errorf("messages[%d].content: %s", i, jsonReason(err))
			}
			out = append(out, abi.Message{ID: ids(i), Role: abi.RoleUser, Content: blocks})
		case "assistant":
			results = -1
			if m.ReasoningContent != "" {
				blocks = append(blocks, abi.Block{Type: abi.BlockThinking, Text: m.ReasoningContent})
			}
			text, err := oaContent(m.Content, skipped)
			if err != nil {
				return nil, fmt.Errorf("messages[%d].content: %s", i, jsonReason(err))
			}
			blocks = append(blocks, text...)
			for k, c := range m.ToolCalls {
				id := c.ID
				if id == "" {
					id = ids(i) + "-call-" + strconv.Itoa(k)
				}
				blocks = append(blocks, abi.Block{Type: abi.BlockToolUse, ID: id, Name: c.Function.Name, Input: objectInput(c.Function.Arguments)})
			}
			if m.FunctionCall != nil {
				lastFunctionCall = ids(i) + "-function-call"
				blocks = append(blocks, abi.Block{Type: abi.BlockToolUse, ID: lastFunctionCall, Name: m.FunctionCall.Name, Input: objectInput(m.FunctionCall.Arguments)})
			}
			out = append(out, abi.Message{ID: ids(i), Role: abi.RoleAssistant, Content: blocks, Usage: m.Usage})
		case "tool", "function":
			content, err := oaContent(m.Content, skipped)
			if err != nil {
				return nil, fmt.Errorf("messages[%d].content: %s", i, jsonReason(err))
			}
			callID := m.ToolCallID
			if m.Role == "function" {
				callID = lastFunctionCall
			}
			r := abi.Block{Type: abi.BlockToolResult, ToolUseID: callID, Text: flatten(content)}
			if results < 0 {
				out = append(out, abi.Message{ID: ids(i), Role: abi.RoleUser})
				results = len(out) - 1
			}
			out[results].Content = append(out[results].Content, r)
		default:
			skipped["role/"+m.Role]++
		}
	}
	return out, nil
}

func readOpenAI(r *bufio.Reader, s *Session) error {
	var doc struct {
		Messages []oaMessage `json:"messages"`
	}
	if _, err := readDoc(r, OpenAI, &doc); err != nil {
		return err
	}
	msgs, err := oaMessages(doc.Messages, func(i int) string { return OpenAI + "-" + strconv.Itoa(i) }, s.Skipped)
	if err != nil {
		return &ParseError{Offset: -1, Format: OpenAI, Reason: err.Error()}
	}
	finish(s, msgs, OpenAI)
	pinLeadingSystem(s.Messages)
	return nil
}

// Chat Completions request shapes.
type (
	openAIOut struct {
		Messages []any `json:"messages"`
	}
	openAIText struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	openAIAssistant struct {
		Role             string           `json:"role"`
		Content          any              `json:"content"`
		ReasoningContent string           `json:"reasoning_content,omitempty"`
		ToolCalls        []openAIToolCall `json:"tool_calls,omitempty"`
	}
	openAIToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	openAITool struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		Content    string `json:"content"`
	}
	openAIPart struct {
		Type     string `json:"type"`
		Text     string `json:"text,omitempty"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url,omitempty"`
	}
)

// writeOpenAI writes a Chat Completions request body. Tool results become
// role "tool" messages, written before the rest of their user message;
// thinking becomes reasoning_content. Lost: message IDs, Usage, the Summary
// flag, the Pinned flag of non-system messages, is_error on tool results, and
// the order of text and tool calls within an assistant message (text first).
func writeOpenAI(w io.Writer, msgs []abi.Message) error {
	out := openAIOut{Messages: make([]any, 0, len(msgs))}
	for _, m := range msgs {
		switch m.Role {
		case abi.RoleSystem:
			out.Messages = append(out.Messages, openAIText{Role: "system", Content: openAIContent(m.Content)})
		case abi.RoleUser:
			var rest []abi.Block
			for _, b := range m.Content {
				if b.Type == abi.BlockToolResult {
					out.Messages = append(out.Messages, openAITool{Role: "tool", ToolCallID: b.ToolUseID, Content: b.Text})
				} else {
					rest = append(rest, b)
				}
			}
			if len(rest) > 0 {
				out.Messages = append(out.Messages, openAIText{Role: "user", Content: openAIContent(rest)})
			}
		case abi.RoleAssistant:
			a := openAIAssistant{Role: "assistant"}
			var thinking []string
			var text []abi.Block
			for _, b := range m.Content {
				switch b.Type {
				case abi.BlockThinking:
					thinking = append(thinking, b.Text)
				case abi.BlockToolUse:
					var c openAIToolCall
					c.ID, c.Type = b.ID, "function"
					c.Function.Name = b.Name
					c.Function.Arguments = string(b.Input)
					if len(b.Input) == 0 {
						c.Function.Arguments = "{}"
					}
					a.ToolCalls = append(a.ToolCalls, c)
				default:
					text = append(text, b)
				}
			}
			a.ReasoningContent = strings.Join(thinking, "\n\n")
			if len(text) > 0 {
				a.Content = openAIContent(text)
			} else if len(a.ToolCalls) == 0 {
				a.Content = ""
			}
			out.Messages = append(out.Messages, a)
		}
	}
	return encodeDoc(w, out)
}

// openAIContent is a plain string for a single text block, else an array of
// parts.
func openAIContent(blocks []abi.Block) any {
	if len(blocks) == 1 && blocks[0].Type == abi.BlockText {
		return blocks[0].Text
	}
	parts := make([]openAIPart, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case abi.BlockImage:
			p := openAIPart{Type: "image_url"}
			p.ImageURL = &struct {
				URL string `json:"url"`
			}{dataURL(b)}
			parts = append(parts, p)
		case abi.BlockText, abi.BlockThinking:
			parts = append(parts, openAIPart{Type: "text", Text: b.Text})
		}
	}
	return parts
}
