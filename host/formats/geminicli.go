package formats

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/compact-host/compact-host/abi"
)

// geminiRecord is one message of a Gemini CLI chat recording.
type geminiRecord struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Content  json.RawMessage `json:"content"` // a string, or Gemini API parts
	Thoughts []struct {
		Subject     string `json:"subject"`
		Description string `json:"description"`
	} `json:"thoughts"`
	ToolCalls []struct {
		ID     string          `json:"id"`
		Name   string          `json:"name"`
		Args   json.RawMessage `json:"args"`
		Status string          `json:"status"`
		Result []struct {
			FunctionResponse *struct {
				Response json.RawMessage `json:"response"`
			} `json:"functionResponse"`
		} `json:"result"`
	} `json:"toolCalls"`
	Tokens *struct {
		Input    int `json:"input"`
		Output   int `json:"output"`
		Cached   int `json:"cached"`
		Thoughts int `json:"thoughts"`
	} `json:"tokens"`
}

// readGeminiCLI reads a Gemini CLI chat recording: {"sessionId",
// "projectHash", "messages": [...]} with messages of type "user" and
// "gemini". A gemini message's thoughts (subject and description) become
// one thinking block, its text a text block and its toolCalls tool_use
// blocks; the functionResponse each call carries becomes its tool_result in
// a user message after it (the response's "output", or its "error" with
// is_error set). The recorded token counts become Usage: the prompt less
// its cached part as input, the cached part as cache reads, the answer and
// the thoughts as output. Messages of other types (info, error, warning
// lines of the CLI) were never sent to the model and are skipped.
func readGeminiCLI(r *bufio.Reader, s *Session) error {
	var doc struct {
		Messages []geminiRecord `json:"messages"`
	}
	if _, err := readDoc(r, GeminiCLI, &doc); err != nil {
		return err
	}
	msgs := make([]abi.Message, 0, len(doc.Messages)*2)
	for i, m := range doc.Messages {
		id := m.ID
		if id == "" {
			id = GeminiCLI + "-" + strconv.Itoa(i)
		}
		text := geminiText(m.Content)
		switch m.Type {
		case "user":
			if text == "" {
				s.Skipped["user (empty)"]++
				continue
			}
			msgs = append(msgs, abi.Message{ID: id, Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: text}}})
		case "gemini":
			var blocks, results []abi.Block
			var thought bytes.Buffer
			for _, t := range m.Thoughts {
				if thought.Len() > 0 {
					thought.WriteString("\n\n")
				}
				if t.Subject != "" {
					thought.WriteString("**" + t.Subject + "**\n")
				}
				thought.WriteString(t.Description)
			}
			if thought.Len() > 0 {
				blocks = append(blocks, abi.Block{Type: abi.BlockThinking, Text: thought.String()})
			}
			if text != "" {
				blocks = append(blocks, abi.Block{Type: abi.BlockText, Text: text})
			}
			for k, c := range m.ToolCalls {
				callID := c.ID
				if callID == "" {
					callID = id + "-call-" + strconv.Itoa(k)
				}
				blocks = append(blocks, abi.Block{Type: abi.BlockToolUse, ID: callID, Name: c.Name, Input: objectInput(c.Args)})
				res := abi.Block{Type: abi.BlockToolResult, ToolUseID: callID, IsError: c.Status == "error" || c.Status == "cancelled"}
				found := false
				for _, part := range c.Result {
					if part.FunctionResponse == nil {
						continue
					}
					found = true
					out, isErr := geminiResponseText(part.FunctionResponse.Response)
					if res.Text != "" {
						res.Text += "\n"
					}
					res.Text += out
					res.IsError = res.IsError || isErr
				}
				if found {
					results = append(results, res)
				}
			}
			var usage *abi.Usage
			if t := m.Tokens; t != nil {
				usage = &abi.Usage{InputTokens: max(t.Input-t.Cached, 0), CacheReadTokens: t.Cached, OutputTokens: t.Output + t.Thoughts}
			}
			if len(blocks) == 0 {
				s.Skipped["gemini (empty)"]++
				continue
			}
			msgs = append(msgs, abi.Message{ID: id, Role: abi.RoleAssistant, Content: blocks, Usage: usage})
			if len(results) > 0 {
				msgs = append(msgs, abi.Message{ID: id + "-results", Role: abi.RoleUser, Content: results})
			}
		default:
			s.Skipped["type/"+m.Type]++
		}
	}
	finish(s, msgs, GeminiCLI)
	return nil
}

// geminiText is a recorded message's content: a string, or Gemini API
// parts whose text parts are joined.
func geminiText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	var s string
	if raw[0] == '"' && decodeChecked(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if raw[0] == '[' && decodeChecked(raw, &parts) == nil {
		var b bytes.Buffer
		for _, p := range parts {
			if p.Text == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}

// geminiResponseText is the text of a functionResponse's response object:
// its "output" or its "error" (then isErr), else the object as JSON.
func geminiResponseText(raw json.RawMessage) (text string, isErr bool) {
	var r struct {
		Output *string `json:"output"`
		Error  *string `json:"error"`
	}
	if decodeChecked(raw, &r) == nil {
		switch {
		case r.Output != nil && r.Error == nil:
			return *r.Output, false
		case r.Error != nil && r.Output == nil:
			return *r.Error, true
		}
	}
	return string(bytes.TrimSpace(raw)), false
}
