package formats

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"unsafe"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/jsonscan"
)

// apiBlock is a content block in the Anthropic Messages API form, as
// Claude Code and Anthropic request files hold them.
type apiBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

// plainContent decodes the content forms Anthropic and OpenAI share:
// absent, null or a string (empty strings yield no block). done is false
// for anything else, an array the caller decodes in its own way.
func plainContent(raw json.RawMessage) (blocks []abi.Block, done bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true, nil
	}
	if raw[0] != '"' {
		return nil, false, nil
	}
	var s string
	if err := decode(raw, &s); err != nil {
		return nil, true, err
	}
	if s == "" {
		return nil, true, nil
	}
	return []abi.Block{{Type: abi.BlockText, Text: s}}, true, nil
}

// apiContent converts Anthropic-style content (a string or an array of
// blocks) to canonical blocks. Blocks with no canonical equivalent are
// counted in skipped as "block/<type>".
func apiContent(raw json.RawMessage, skipped map[string]int) ([]abi.Block, error) {
	raw = bytes.TrimSpace(raw)
	if blocks, done, err := plainContent(raw); done {
		return blocks, err
	}
	var blocks []apiBlock
	if err := decode(raw, &blocks); err != nil {
		return nil, err
	}
	out := make([]abi.Block, 0, len(blocks))
	for _, b := range blocks {
		if c, ok, err := apiBlockOf(b, skipped, false); err != nil {
			return nil, err
		} else if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// apiBlockOf converts one Anthropic-style block. A block with no canonical
// equivalent is counted in skipped as "block/<type>" and ok is false, unless
// keep is set: then it becomes the placeholder text "[<type>]", so that a
// request writer finds the original by its place and writes it back.
func apiBlockOf(b apiBlock, skipped map[string]int, keep bool) (c abi.Block, ok bool, err error) {
	switch b.Type {
	case "text":
		return abi.Block{Type: abi.BlockText, Text: b.Text}, true, nil
	case "thinking":
		return abi.Block{Type: abi.BlockThinking, Text: b.Thinking}, true, nil
	case "tool_use":
		return abi.Block{Type: abi.BlockToolUse, ID: b.ID, Name: b.Name, Input: objectInput(b.Input)}, true, nil
	case "tool_result":
		text, err := apiResultText(b.Content)
		if err != nil {
			return c, false, err
		}
		return abi.Block{Type: abi.BlockToolResult, ToolUseID: b.ToolUseID, Text: text, IsError: b.IsError}, true, nil
	case "image":
		return apiImage(b), true, nil
	}
	if keep {
		return abi.Block{Type: abi.BlockText, Text: "[" + b.Type + "]"}, true, nil
	}
	skipped["block/"+b.Type]++
	return c, false, nil
}

// apiResultText flattens the content of a tool_result to text. Images in a
// result cannot be kept (a canonical tool_result holds text only) and leave a
// placeholder.
func apiResultText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := decode(raw, &s)
		return s, err
	}
	var blocks []apiBlock
	if err := decode(raw, &blocks); err != nil {
		return "", err
	}
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		} else {
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n"), nil
}

func apiImage(b apiBlock) abi.Block {
	if b.Source != nil && b.Source.Type == "base64" {
		if data, err := base64.StdEncoding.DecodeString(b.Source.Data); err == nil {
			return abi.Block{Type: abi.BlockImage, MediaType: b.Source.MediaType, Data: data}
		}
		return abi.Block{Type: abi.BlockText, Text: "[image: undecodable data]"}
	}
	if b.Source != nil && b.Source.URL != "" {
		return abi.Block{Type: abi.BlockText, Text: "[image: " + b.Source.URL + "]"}
	}
	return abi.Block{Type: abi.BlockText, Text: "[image]"}
}

// objectInput returns a tool call's input as compact JSON. A missing input
// becomes {}; a JSON string holding a JSON object is unwrapped; any other
// non-object becomes {"input": <value>}, so the input is always an object.
func objectInput(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	if raw[0] == '"' {
		var s string
		if decode(raw, &s) == nil {
			return argumentsInput(s)
		}
	}
	if raw[0] == '{' {
		if in, ok := compact(raw); ok {
			return in
		}
	}
	wrapped, _ := json.Marshal(map[string]json.RawMessage{"input": raw})
	return objectInput(wrapped)
}

// argumentsInput turns a tool call's arguments string (OpenAI style) into an
// input object: the string itself when it holds a JSON object, else
// {"input": "<string>"}.
func argumentsInput(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") {
		if in, ok := compact(unsafe.Slice(unsafe.StringData(t), len(t))); ok {
			return in
		}
	}
	wrapped, _ := json.Marshal(map[string]string{"input": s})
	return json.RawMessage(wrapped)
}

// compact is json.Compact of b into a new slice, false if b is not JSON.
func compact(b []byte) (json.RawMessage, bool) {
	switch (jsonscan.Scanner{}).Valid(b) {
	case jsonscan.OK:
		return compactJSON(b), true
	case jsonscan.Undecided:
		var buf bytes.Buffer
		if json.Compact(&buf, b) == nil {
			return json.RawMessage(buf.Bytes()), true
		}
	}
	return nil, false
}

// compactJSON is json.Compact of valid JSON text, in a new slice: the
// white space outside strings dropped.
func compactJSON(b []byte) json.RawMessage {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		switch c := b[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			end, _ := jsonscan.String(b, i)
			out = append(out, b[i:end]...)
			i = end
		default:
			out = append(out, c)
			i++
		}
	}
	return out
}

// dataURLImage converts a data: URL to an image block; any other URL, or
// undecodable data, becomes a text placeholder.
func dataURLImage(url string) abi.Block {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		if mt, ok2 := strings.CutSuffix(meta, ";base64"); ok && ok2 {
			if b, err := base64.StdEncoding.DecodeString(data); err == nil {
				return abi.Block{Type: abi.BlockImage, MediaType: mt, Data: b}
			}
		}
		return abi.Block{Type: abi.BlockText, Text: "[image: undecodable data]"}
	}
	return abi.Block{Type: abi.BlockText, Text: "[image: " + url + "]"}
}

// dataURL encodes an image block as a data: URL.
func dataURL(b abi.Block) string {
	return "data:" + b.MediaType + ";base64," + base64.StdEncoding.EncodeToString(b.Data)
}

// textOf joins the text blocks of content.
func textOf(content []abi.Block, typ string) string {
	var parts []string
	for _, b := range content {
		if b.Type == typ {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// oaPart is a content part of OpenAI-style messages (Chat Completions and
// Responses API items).
type oaPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"` // {"url": ...} in Chat Completions, a string in Responses
}

func (p oaPart) imageURL() string {
	raw := bytes.TrimSpace(p.ImageURL)
	if len(raw) == 0 {
		return ""
	}
	var s string
	if raw[0] == '"' {
		_ = decode(raw, &s)
		return s
	}
	var obj struct {
		URL string `json:"url"`
	}
	_ = decode(raw, &obj)
	return obj.URL
}

// oaContent converts OpenAI-style content (a string, null, or an array of
// parts) to blocks. Empty strings yield no block. keep is as for oaParts.
func oaContent(raw json.RawMessage, skipped map[string]int, keep bool) ([]abi.Block, error) {
	raw = bytes.TrimSpace(raw)
	if blocks, done, err := plainContent(raw); done {
		return blocks, err
	}
	var parts []oaPart
	if err := decode(raw, &parts); err != nil {
		return nil, err
	}
	return oaParts(parts, skipped, keep), nil
}

// oaParts converts content parts. A part with no canonical equivalent is
// counted in skipped as "part/<type>", unless keep is set: then it becomes
// the placeholder text "[<type>]", one block per part, so that a request
// writer finds the original by its place.
func oaParts(parts []oaPart, skipped map[string]int, keep bool) []abi.Block {
	out := make([]abi.Block, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text", "summary_text", "reasoning_text":
			out = append(out, abi.Block{Type: abi.BlockText, Text: p.Text})
		case "refusal":
			out = append(out, abi.Block{Type: abi.BlockText, Text: p.Refusal})
		case "image_url", "input_image":
			out = append(out, dataURLImage(p.imageURL()))
		default:
			if keep {
				out = append(out, abi.Block{Type: abi.BlockText, Text: "[" + p.Type + "]"})
			} else {
				skipped["part/"+p.Type]++
			}
		}
	}
	return out
}

// flatten renders blocks as the text of a tool result.
func flatten(blocks []abi.Block) string {
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == abi.BlockImage {
			parts = append(parts, "[image]")
		} else {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}
