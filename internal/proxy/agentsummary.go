package proxy

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
)

// An agent that compacts its own conversation asks the model for a
// summary of everything above, in one request that carries the whole
// history and ends with the instruction. Folding that request would have
// the agent's summary written from what the proxy kept (Claude Code's
// /compact once summarized 2 of 185 messages), so it goes upstream
// whole, and is folded only when it would not fit, never by dropping
// messages.

// Signs by which a request is known for an agent's own summary request.
const (
	signCodex      = "codex"
	signClaudeCode = "claude-code"
	signGeminiCLI  = "gemini-cli"
	signGeneric    = "generic"
)

// summarizeInstruction is the generic sign: an instruction to summarize,
// compact or condense the conversation (history, session, context, chat,
// transcript) above, within one clause.
var summarizeInstruction = regexp.MustCompile(`(?i)\b(summari[sz]e|summary of|compact|condense|recap)\b[^.\n]{0,60}\b(conversation|history|session|context|chat|transcript|discussion)\b`)

// maxInstructionScan bounds how much of the last message's text the signs
// are looked for in: the instructions agents send are a few kilobytes.
const maxInstructionScan = 64 << 10

// agentSummarySign says whether the request is an agent asking the model
// to summarize its own conversation, and by which sign ("" if not):
// Codex's checkpoint compaction prompt, Claude Code's summary prompt (its
// <analysis> and <summary> instructions), or, in a request that offers
// the model no tool (none, or tool_choice "none"), a last user message
// that tells it to summarize the conversation.
func (x *exchange) agentSummarySign() string {
	// The instruction is in the last message but for system messages
	// after it: Claude Code with its default model ends the request with
	// one that gives the date.
	last := len(x.raw.msgs) - 1
	for last >= 0 && isSystemMessage(x.raw.msg(last)) {
		last--
	}
	if last < 0 {
		return ""
	}
	text, ok := userText(x.raw.msg(last))
	if !ok {
		return ""
	}
	if len(text) > maxInstructionScan {
		text = text[len(text)-maxInstructionScan:]
	}
	lower := strings.ToLower(text)
	switch {
	case strings.Contains(text, "CONTEXT CHECKPOINT COMPACTION"):
		return signCodex
	case strings.Contains(lower, "<analysis>") && strings.Contains(lower, "<summary>") &&
		strings.Contains(lower, "summary of the conversation"):
		return signClaudeCode
	case x.kind == KindGemini && strings.Contains(text, "<state_snapshot>") &&
		bytes.Contains(x.raw.field("systemInstruction"), []byte("<state_snapshot>")):
		// Gemini CLI's compression and its check of the snapshot: the
		// system prompt and the last user text both ask for the
		// <state_snapshot> it keeps as its summary.
		return signGeminiCLI
	case x.offersNoTool() && summarizeInstruction.MatchString(text):
		return signGeneric
	}
	return ""
}

// isSystemMessage reports whether raw is a message of the system role.
func isSystemMessage(raw []byte) bool {
	var m struct {
		Role string `json:"role"`
	}
	return json.Unmarshal(raw, &m) == nil && m.Role == "system"
}

// offersNoTool reports whether the model can call no tool in this
// request: no tools, an empty list, or tool_choice "none".
func (x *exchange) offersNoTool() bool {
	tools := bytes.TrimSpace(x.raw.field("tools"))
	if len(tools) == 0 || string(tools) == "null" || string(tools) == "[]" {
		return true
	}
	var choice any
	if c := x.raw.field("tool_choice"); c != nil && json.Unmarshal(c, &choice) == nil {
		switch v := choice.(type) {
		case string:
			return v == "none"
		case map[string]any:
			return v["type"] == "none"
		}
	}
	return false
}

// userText is the text of a user message (Messages, Chat Completions, a
// Responses message item or a Gemini content): its string content, or its
// text parts joined. ok is false for any other message.
func userText(raw []byte) (text string, ok bool) {
	var m struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Parts   []struct {
			Text    *string `json:"text"`
			Thought bool    `json:"thought"`
		} `json:"parts"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Role != "user" || (m.Type != "" && m.Type != "message") {
		return "", false
	}
	if len(m.Content) == 0 && len(m.Parts) > 0 {
		var b strings.Builder
		for _, p := range m.Parts {
			if p.Text != nil && !p.Thought {
				if b.Len() > 0 {
					b.WriteString("\n")
				}
				b.WriteString(*p.Text)
			}
		}
		return b.String(), b.Len() > 0
	}
	c := bytes.TrimSpace(m.Content)
	if len(c) > 0 && c[0] == '"' {
		return text, json.Unmarshal(c, &text) == nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(c, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "input_text" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		}
	}
	return b.String(), b.Len() > 0
}
