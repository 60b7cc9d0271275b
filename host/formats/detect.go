package formats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// detectLines is how many JSONL lines Detect looks at before giving up.
const detectLines = 32

// Detect names the format of a session from the start of its content. head
// may be cut anywhere; Detect decides from the first records it can read.
// It returns ErrUnknownFormat (wrapped) when no format matches.
func Detect(head []byte) (string, error) {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	rest := bytes.TrimLeft(head, " \t\r\n")
	if len(rest) == 0 {
		return "", unknownFormat("empty input")
	}
	if isAiderHistory(rest) {
		return Aider, nil
	}
	if rest[0] == '[' {
		return detectArray(rest)
	}
	if rest[0] != '{' {
		return "", unknownFormat("expected JSON, got " + snippet(rest))
	}
	// A whole-document format is one object, usually over many lines; a
	// JSONL format is one object per line. Look at the first object's keys;
	// if they do not tell and the object is complete, look at the next.
	for i := 0; i < detectLines; i++ {
		f, end := detectObject(rest)
		if f != "" {
			return f, nil
		}
		if end <= 0 {
			break
		}
		rest = bytes.TrimLeft(rest[end:], " \t\r\n")
		if len(rest) == 0 || rest[0] != '{' {
			break
		}
	}
	return "", unknownFormat(noneReason(head))
}

// noneReason says what input that matches no format holds: the keys of its
// first object.
func noneReason(head []byte) string {
	rest := bytes.TrimLeft(head, " \t\r\n")
	dec := json.NewDecoder(bytes.NewReader(rest))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "no known records at the start"
	}
	var keys []string
	for dec.More() && len(keys) < 8 {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		keys = append(keys, fmt.Sprintf("%q", tok))
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
	}
	if len(keys) == 0 {
		return "an empty JSON object"
	}
	return "a JSON object with keys " + strings.Join(keys, ", ") + " that no supported format has"
}

// detectObject scans the top-level keys of the JSON object starting data,
// which may be cut short, and names the format they show, or "". When it
// cannot tell, end is the offset just past the object if the object is
// complete, else 0.
func detectObject(data []byte) (format string, end int) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", 0
	}
	complete := false
	keys := map[string]bool{}
	var typ, trajectoryFormat string
	var messages []json.RawMessage
	var system bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		keys[key] = true
		switch key {
		case "history", "trajectory":
			return SWEAgent, 0
		case "parentUuid", "isSidechain", "leafUuid":
			return ClaudeCode, 0
		case "projectHash":
			return GeminiCLI, 0
		}
		var v json.RawMessage
		switch key {
		case "messages":
			messages, err = decodeArrayPrefix(dec)
			if err != nil {
				return decideJSON(keys, typ, trajectoryFormat, messages, system), 0
			}
			continue
		}
		if err := dec.Decode(&v); err != nil {
			break
		}
		switch key {
		case "type":
			_ = json.Unmarshal(v, &typ)
			if f := formatOfType(typ); f != "" {
				return f, 0
			}
		case "trajectory_format":
			_ = json.Unmarshal(v, &trajectoryFormat)
		case "system":
			system = true
		case "info":
			var info map[string]json.RawMessage
			if json.Unmarshal(v, &info) == nil && info["projectID"] != nil && info["directory"] != nil {
				return OpenCode, 0
			}
		}
	}
	if tok, err := dec.Token(); err == nil && tok == json.Delim('}') {
		complete = true
	}
	if f := decideJSON(keys, typ, trajectoryFormat, messages, system); f != "" || !complete {
		return f, 0
	}
	return "", int(dec.InputOffset())
}

// decodeArrayPrefix decodes the elements of the array at dec, stopping
// quietly where the input is cut.
func decodeArrayPrefix(dec *json.Decoder) ([]json.RawMessage, error) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("not an array")
	}
	var out []json.RawMessage
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return out, err
		}
		out = append(out, v)
	}
	_, err := dec.Token()
	return out, err
}

// formatOfType names the JSONL format whose records carry this "type".
func formatOfType(typ string) string {
	switch typ {
	case "session_meta", "response_item", "event_msg", "turn_context", "compacted":
		return Codex
	case "user", "assistant", "progress", "summary", "file-history-snapshot", "queue-operation":
		return ClaudeCode
	case "message", "compaction":
		return Canonical
	}
	if strings.HasPrefix(typ, "session.") || strings.HasPrefix(typ, "user.") ||
		strings.HasPrefix(typ, "assistant.") || strings.HasPrefix(typ, "tool.") ||
		strings.HasPrefix(typ, "system.") || strings.HasPrefix(typ, "hook.") {
		return Copilot
	}
	return ""
}

func decideJSON(keys map[string]bool, typ, trajectoryFormat string, messages []json.RawMessage, system bool) string {
	switch {
	case strings.HasPrefix(trajectoryFormat, "mini-swe-agent"):
		return MiniSWEAgent
	case keys["messages"] && recordingEvidence(messages) != "":
		return recordingEvidence(messages)
	case keys["info"] && !keys["role"] && !keys["type"]:
		// Only mini-swe-agent puts "info" first; it may be all the head
		// holds.
		return MiniSWEAgent
	case keys["role"] && keys["content"]:
		return Canonical
	case keys["messages"]:
		if f := chatEvidence(messages); f != "" {
			return f
		}
		if system {
			return Anthropic
		}
		return OpenAI
	case typ == "system" && keys["subtype"]:
		return ClaudeCode
	}
	return ""
}

// chatEvidence is the chat format that only one of the two could be, from
// the first message that tells, or "" when none does. A system message
// tells nothing: the Messages API takes them inside "messages" too.
func chatEvidence(messages []json.RawMessage) string {
	for _, raw := range messages {
		var m struct {
			Role       string          `json:"role"`
			ToolCalls  json.RawMessage `json:"tool_calls"`
			ToolCallID string          `json:"tool_call_id"`
			Content    json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		switch m.Role {
		case "developer", "tool", "function":
			return OpenAI
		}
		if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" || m.ToolCallID != "" {
			return OpenAI
		}
		var parts []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			continue
		}
		for _, p := range parts {
			switch p.Type {
			case "tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document":
				return Anthropic
			case "image_url", "input_audio", "refusal":
				return OpenAI
			}
		}
	}
	return ""
}

// refuseOther refuses a request of the other chat format: the readers of
// both accept any {"messages": [...]}, and a request read as the wrong one
// loses its tool calls. hasSystem is whether the request has a top-level
// "system", which only Anthropic's has.
func refuseOther(format string, hasSystem bool, n int, message func(i int) json.RawMessage) error {
	msgs := make([]json.RawMessage, n)
	for i := range msgs {
		msgs[i] = message(i)
	}
	looks := chatEvidence(msgs)
	if looks == "" && hasSystem {
		looks = Anthropic
	}
	if looks == "" || looks == format {
		return nil
	}
	return &MismatchError{Format: format, Looks: looks}
}

// recordingEvidence names the agent recording whose messages look like
// these: opencode's {info, parts} or Gemini CLI's {type: "gemini"}.
func recordingEvidence(messages []json.RawMessage) string {
	for _, raw := range messages {
		var m struct {
			Info  json.RawMessage `json:"info"`
			Parts json.RawMessage `json:"parts"`
			Type  string          `json:"type"`
			Role  string          `json:"role"`
		}
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		switch {
		case m.Info != nil && m.Parts != nil:
			return OpenCode
		case m.Type == "gemini" && m.Role == "":
			return GeminiCLI
		}
	}
	return ""
}

// isAiderHistory reports whether head starts an Aider chat history: a
// "# aider chat started at" line, maybe after blank lines, or a "#### "
// prompt first.
func isAiderHistory(head []byte) bool {
	return bytes.HasPrefix(head, []byte(aiderStart)) || bytes.HasPrefix(head, []byte("#### "))
}

// detectArray names the format of a document that is a JSON array, from its
// first element: a Cline / Roo Code / Kilo Code api_conversation_history.json
// holds {role, content} messages. Its sibling ui_messages.json (UI events
// {ts, type: say|ask}) is refused with the file to read instead.
func detectArray(head []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(head))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return "", unknownFormat("expected JSON, got " + snippet(head))
	}
	if !dec.More() {
		return "", unknownFormat("an empty JSON array")
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", unknownFormat("a JSON array whose first element is not an object")
	}
	keys := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		keys[key] = true
		var v json.RawMessage
		if key == "type" || key == "say" || key == "ask" {
			var typ string
			if dec.Decode(&typ) != nil {
				break
			}
			if keys["ts"] && (typ == "say" || typ == "ask") || key != "type" {
				return "", unknownFormat(uiMessagesReason)
			}
			continue
		}
		if dec.Decode(&v) != nil {
			break
		}
		if keys["role"] && keys["content"] {
			return Cline, nil
		}
	}
	if keys["role"] && keys["content"] {
		return Cline, nil
	}
	return "", unknownFormat("a JSON array of objects with keys no supported format has")
}

// uiMessagesReason is why a Cline / Roo Code ui_messages.json is not read.
const uiMessagesReason = "a Cline / Roo Code ui_messages.json (the extension's UI events, not what the model was sent): " +
	"read api_conversation_history.json in the same task folder instead (format cline)"
