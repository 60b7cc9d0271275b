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
		return "", fmt.Errorf("%w: empty input", ErrUnknownFormat)
	}
	if rest[0] != '{' {
		return "", fmt.Errorf("%w: expected a JSON object, got %s", ErrUnknownFormat, snippet(rest))
	}
	// A whole-document format is one object, usually over many lines; a
	// JSONL format is one object per line. Look at the first object's keys
	// either way.
	for i := 0; i < detectLines && len(rest) > 0; i++ {
		if f := detectObject(rest); f != "" {
			return f, nil
		}
		// Undecided: the object is a JSONL record of no telling type; try
		// the next line.
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			break
		}
		rest = bytes.TrimLeft(rest[nl+1:], " \t\r\n")
	}
	return "", fmt.Errorf("%w: no known records in the first lines", ErrUnknownFormat)
}

// detectObject scans the top-level keys of the JSON object starting data,
// which may be cut short, and names the format they show, or "".
func detectObject(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
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
			return SWEAgent
		case "parentUuid", "isSidechain", "leafUuid":
			return ClaudeCode
		}
		var v json.RawMessage
		switch key {
		case "messages":
			messages, err = decodeArrayPrefix(dec)
			if err != nil {
				return decideJSON(keys, typ, trajectoryFormat, messages, system, data)
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
				return f
			}
		case "trajectory_format":
			_ = json.Unmarshal(v, &trajectoryFormat)
		case "system":
			system = true
		}
	}
	return decideJSON(keys, typ, trajectoryFormat, messages, system, data)
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

func decideJSON(keys map[string]bool, typ, trajectoryFormat string, messages []json.RawMessage, system bool, data []byte) string {
	switch {
	case strings.HasPrefix(trajectoryFormat, "mini-swe-agent"):
		return MiniSWEAgent
	case keys["info"] && (keys["messages"] || bytes.Contains(data, []byte(`"mini_version"`))):
		return MiniSWEAgent
	case keys["role"] && keys["content"]:
		return Canonical
	case keys["messages"]:
		if system {
			return Anthropic
		}
		return chatFlavour(messages)
	case typ == "system" && keys["subtype"]:
		return ClaudeCode
	}
	return ""
}

// chatFlavour tells an Anthropic request from an OpenAI one by its
// messages. Plain text messages read the same either way; they are called
// OpenAI.
func chatFlavour(messages []json.RawMessage) string {
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
		case "system", "developer", "tool", "function":
			return OpenAI
		}
		if len(m.ToolCalls) > 0 || m.ToolCallID != "" {
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
	return OpenAI
}
