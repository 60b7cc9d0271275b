package formats

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// GeminiAPI is a Gemini API generateContent request:
// {"systemInstruction":{...},"contents":[{"role":"user"|"model","parts":[...]}]}.
// Read keeps the body as for Anthropic; see readGeminiAPI for how parts
// become blocks. Written from messages alone, it loses message IDs, Usage,
// the Summary flag, the Pinned flag of non-system messages, is_error,
// thought signatures and the parts the canonical form does not hold.
const GeminiAPI = "gemini-api"

// GeminiSystemID is the ID of the pinned system message a Gemini
// request's "systemInstruction" becomes.
const GeminiSystemID = GeminiAPI + "-system"

// geminiCallPrefix starts the IDs the reader gives function calls sent
// without one; the writer leaves such IDs out again.
const geminiCallPrefix = GeminiAPI + "-call-"

// geminiContent is an element of a Gemini request's "contents".
type geminiContent struct {
	Role  string            `json:"role"`
	Parts []json.RawMessage `json:"parts"`
}

// geminiPart is one part of a content: exactly one of its data fields is
// set; thought and thoughtSignature may come with any of them.
type geminiPart struct {
	Text         *string `json:"text"`
	Thought      bool    `json:"thought"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
	InlineData *struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	} `json:"inlineData"`
	FileData *struct {
		MimeType string `json:"mimeType"`
		FileURI  string `json:"fileUri"`
	} `json:"fileData"`
	ExecutableCode *struct {
		Language string `json:"language"`
		Code     string `json:"code"`
	} `json:"executableCode"`
	CodeExecutionResult *struct {
		Outcome string `json:"outcome"`
		Output  string `json:"output"`
	} `json:"codeExecutionResult"`
}

// readGeminiAPI reads a Gemini generateContent request. "systemInstruction"
// becomes a pinned system message; each element of "contents" becomes one
// message ("gemini-api-<index>"), role "model" the assistant. A
// functionCall becomes a tool call (with the call's id, or one made from
// where it stands); a functionResponse a tool result, paired with the call
// of the same id, else with the first open call of the same name of the
// model turn before it, so a cut never parts the two. Thought parts are
// thinking; inlineData images are images; fileData, executableCode and
// codeExecutionResult are text; a part of any other kind stands as an
// empty thinking block in a model turn and a short text in a user turn,
// and is counted in Skipped. Function results come first in their
// message, as the canonical form wants.
func readGeminiAPI(r *bufio.Reader, s *Session) error {
	var doc struct {
		SystemInstruction json.RawMessage `json:"systemInstruction"`
	}
	data, err := readDoc(r, GeminiAPI, &doc)
	if err != nil {
		return err
	}
	req, err := parseRequest(GeminiAPI, data)
	if err != nil {
		return err
	}
	var msgs []abi.Message
	if sys := bytes.TrimSpace(doc.SystemInstruction); len(sys) > 0 && string(sys) != "null" {
		text, err := geminiSystemText(sys)
		if err != nil {
			return &ParseError{Offset: -1, Format: GeminiAPI, Reason: `"systemInstruction": ` + err.Error()}
		}
		if text != "" {
			msgs = append(msgs, abi.Message{ID: GeminiSystemID, Role: abi.RoleSystem, Pinned: true,
				Content: []abi.Block{{Type: abi.BlockText, Text: text}}})
			req.add(GeminiSystemID, &source{role: abi.RoleSystem, blocks: msgs[0].Content, raws: make([]span, 1)})
		}
	}
	// open are the calls of the latest model turn that no result answered.
	var open []*abi.Block
	for i, e := range req.elems {
		var c geminiContent
		if err := decodeChecked(req.bytesOf(e), &c); err != nil {
			return &ParseError{Offset: int64(e.start), Line: lineOf(data, int64(e.start)), Format: GeminiAPI,
				Reason: fmt.Sprintf("contents[%d]: %s", i, jsonReason(err))}
		}
		id := GeminiAPI + "-" + strconv.Itoa(i)
		role := abi.RoleUser
		switch c.Role {
		case "user", "":
		case "model":
			role = abi.RoleAssistant
		default:
			return &ParseError{Offset: int64(e.start), Line: lineOf(data, int64(e.start)), Format: GeminiAPI,
				Reason: fmt.Sprintf("contents[%d]: role %q; want user or model", i, c.Role)}
		}
		var results, rest []abi.Block
		for k, raw := range c.Parts {
			var p geminiPart
			if err := decodeChecked(raw, &p); err != nil {
				return &ParseError{Offset: int64(e.start), Line: lineOf(data, int64(e.start)), Format: GeminiAPI,
					Reason: fmt.Sprintf("contents[%d].parts[%d]: %s", i, k, jsonReason(err))}
			}
			b := geminiBlock(&p, raw, role, s.Skipped)
			switch {
			case p.FunctionCall != nil && role == abi.RoleAssistant:
				if b.ID == "" {
					b.ID = geminiCallPrefix + strconv.Itoa(i) + "-" + strconv.Itoa(k)
				}
				rest = append(rest, b)
			case p.FunctionResponse != nil && role == abi.RoleUser:
				b.ToolUseID = geminiPair(open, p.FunctionResponse.ID, p.FunctionResponse.Name, i, k)
				results = append(results, b)
			default:
				rest = append(rest, b)
			}
		}
		content := append(results, rest...)
		if len(content) == 0 {
			content = []abi.Block{{Type: abi.BlockText, Text: "[no parts]"}}
		}
		msgs = append(msgs, abi.Message{ID: id, Role: role, Content: content})
		req.add(id, &source{role: role, elems: []int{i}, blocks: content, raws: make([]span, len(content))})
		if role == abi.RoleAssistant {
			open = open[:0]
			m := &msgs[len(msgs)-1]
			for j := range m.Content {
				if m.Content[j].Type == abi.BlockToolUse {
					open = append(open, &m.Content[j])
				}
			}
		}
	}
	for k := range msgs {
		msgs[k].Content = cloneBlocks(msgs[k].Content)
	}
	finish(s, msgs, GeminiAPI)
	pinLeadingSystem(s.Messages)
	s.Request = req
	return nil
}

// geminiPair names the call a functionResponse answers, and closes it:
// the call with its id, else the first open call of its name, else the
// first open call. A response that answers none gets an ID of its own,
// which the normalizer reports as a repair.
func geminiPair(open []*abi.Block, id, name string, i, k int) string {
	pick := -1
	for j, c := range open {
		if c == nil {
			continue
		}
		if id != "" && c.ID == id {
			pick = j
			break
		}
		if id == "" && pick < 0 && c.Name == name {
			pick = j
		}
	}
	if pick < 0 && id == "" {
		for j, c := range open {
			if c != nil {
				pick = j
				break
			}
		}
	}
	if pick < 0 {
		if id != "" {
			return id
		}
		return geminiCallPrefix + "unanswered-" + strconv.Itoa(i) + "-" + strconv.Itoa(k)
	}
	got := open[pick].ID
	open[pick] = nil
	return got
}

// geminiBlock is the canonical block of one part.
func geminiBlock(p *geminiPart, raw json.RawMessage, role string, skipped map[string]int) abi.Block {
	switch {
	case p.FunctionCall != nil:
		if role != abi.RoleAssistant {
			return abi.Block{Type: abi.BlockText, Text: "[functionCall " + p.FunctionCall.Name + "]"}
		}
		return abi.Block{Type: abi.BlockToolUse, ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Input: objectInput(p.FunctionCall.Args)}
	case p.FunctionResponse != nil:
		text := geminiResultText(p.FunctionResponse.Response)
		if role != abi.RoleUser {
			return abi.Block{Type: abi.BlockText, Text: "[functionResponse " + p.FunctionResponse.Name + "] " + text}
		}
		return abi.Block{Type: abi.BlockToolResult, Text: text}
	case p.Text != nil && p.Thought:
		return abi.Block{Type: abi.BlockThinking, Text: *p.Text}
	case p.Text != nil:
		return abi.Block{Type: abi.BlockText, Text: *p.Text}
	case p.InlineData != nil:
		if strings.HasPrefix(p.InlineData.MimeType, "image/") {
			if data, err := base64.StdEncoding.DecodeString(p.InlineData.Data); err == nil {
				return abi.Block{Type: abi.BlockImage, MediaType: p.InlineData.MimeType, Data: data}
			}
		}
		return abi.Block{Type: abi.BlockText, Text: "[inlineData " + p.InlineData.MimeType + ", " +
			strconv.Itoa(base64.StdEncoding.DecodedLen(len(p.InlineData.Data))) + " bytes]"}
	case p.FileData != nil:
		return abi.Block{Type: abi.BlockText, Text: "[file " + p.FileData.MimeType + ": " + p.FileData.FileURI + "]"}
	case p.ExecutableCode != nil:
		return abi.Block{Type: abi.BlockText, Text: "```" + strings.ToLower(p.ExecutableCode.Language) + "\n" + p.ExecutableCode.Code + "\n```"}
	case p.CodeExecutionResult != nil:
		return abi.Block{Type: abi.BlockText, Text: "[" + p.CodeExecutionResult.Outcome + "]\n" + p.CodeExecutionResult.Output}
	}
	// A part of a kind to come, or a thought signature alone: kept as
	// sent in the request, counted here.
	name := "part"
	var keys map[string]json.RawMessage
	if json.Unmarshal(raw, &keys) == nil {
		for k := range keys {
			if k != "thought" && k != "thoughtSignature" {
				name = k
				break
			}
		}
	}
	skipped["gemini "+name]++
	if role == abi.RoleAssistant {
		return abi.Block{Type: abi.BlockThinking}
	}
	return abi.Block{Type: abi.BlockText, Text: "[" + name + "]"}
}

// geminiResultText is a functionResponse's "response" as a result's
// text: the object in compact JSON, any other value wrapped as
// {"output": value}, so that the writer sends back what was read.
func geminiResultText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	var buf bytes.Buffer
	object := raw[0] == '{'
	if !object {
		buf.WriteString(`{"output":`)
	}
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	if !object {
		buf.WriteByte('}')
	}
	return buf.String()
}

// geminiSystemText reads a systemInstruction: a content whose text parts
// are the prompt, or a plain string.
func geminiSystemText(raw json.RawMessage) (string, error) {
	if raw[0] == '"' {
		var s string
		if err := decode(raw, &s); err != nil {
			return "", fmt.Errorf("expected a string or a content, %s", jsonReason(err))
		}
		return s, nil
	}
	var c geminiContent
	if err := decode(raw, &c); err != nil {
		return "", fmt.Errorf("expected a content {\"parts\":[...]}, %s", jsonReason(err))
	}
	var texts []string
	for _, raw := range c.Parts {
		var p geminiPart
		if decode(raw, &p) == nil && p.Text != nil {
			texts = append(texts, *p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// Gemini request shapes, as the writers make them.
type (
	geminiContentOut struct {
		Role  string `json:"role"`
		Parts []any  `json:"parts"`
	}
	geminiTextOut struct {
		Text    string `json:"text"`
		Thought bool   `json:"thought,omitempty"`
	}
	geminiCallOut struct {
		FunctionCall struct {
			ID   string          `json:"id,omitempty"`
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
		} `json:"functionCall"`
	}
	geminiResponseOut struct {
		FunctionResponse struct {
			ID       string          `json:"id,omitempty"`
			Name     string          `json:"name"`
			Response json.RawMessage `json:"response"`
		} `json:"functionResponse"`
	}
	geminiInlineOut struct {
		InlineData struct {
			MimeType string `json:"mimeType"`
			Data     string `json:"data"`
		} `json:"inlineData"`
	}
)

// callNames maps the ID of every call in msgs to its function's name: a
// functionResponse names the function it answers.
func callNames(msgs []abi.Message) map[string]string {
	names := map[string]string{}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == abi.BlockToolUse {
				names[b.ID] = b.Name
			}
		}
	}
	return names
}

// GeminiContents encodes msgs as the elements of a Gemini request's
// "contents": role "model" for the assistant, "user" otherwise (a system
// message included), a result naming the function of its call.
func GeminiContents(msgs []abi.Message) []any {
	names := callNames(msgs)
	out := make([]any, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, geminiContentOf(m, names))
	}
	return out
}

// geminiContentOf encodes m; names maps call IDs to function names.
func geminiContentOf(m abi.Message, names map[string]string) any {
	role := "user"
	if m.Role == abi.RoleAssistant {
		role = "model"
	}
	parts := make([]any, 0, len(m.Content))
	for _, b := range m.Content {
		switch b.Type {
		case abi.BlockText:
			parts = append(parts, geminiTextOut{Text: b.Text})
		case abi.BlockThinking:
			parts = append(parts, geminiTextOut{Text: b.Text, Thought: true})
		case abi.BlockImage:
			var p geminiInlineOut
			p.InlineData.MimeType, p.InlineData.Data = b.MediaType, base64.StdEncoding.EncodeToString(b.Data)
			parts = append(parts, p)
		case abi.BlockToolUse:
			var p geminiCallOut
			p.FunctionCall.ID, p.FunctionCall.Name, p.FunctionCall.Args = geminiWireID(b.ID), b.Name, objectInput(b.Input)
			parts = append(parts, p)
		case abi.BlockToolResult:
			var p geminiResponseOut
			p.FunctionResponse.ID, p.FunctionResponse.Name = geminiWireID(b.ToolUseID), names[b.ToolUseID]
			p.FunctionResponse.Response = geminiResponse(b.Text)
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		parts = append(parts, geminiTextOut{})
	}
	return geminiContentOut{Role: role, Parts: parts}
}

// geminiWireID is the id a call is sent with: none for the IDs the reader
// made up.
func geminiWireID(id string) string {
	if strings.HasPrefix(id, geminiCallPrefix) {
		return ""
	}
	return id
}

// geminiResponse is a result's "response", which must be an object: the
// result itself when it is one, else {"output": text}.
func geminiResponse(text string) json.RawMessage {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := marshal(struct {
		Output string `json:"output"`
	}{text})
	return b
}

// geminiSystemOut is a systemInstruction written from text.
func geminiSystemOut(text string) ([]byte, error) {
	return marshal(struct {
		Parts []geminiTextOut `json:"parts"`
	}{[]geminiTextOut{{Text: text}}})
}

// writeGeminiAPI writes a Gemini request body from canonical messages
// alone: the leading system messages as "systemInstruction", the rest as
// "contents".
func writeGeminiAPI(w io.Writer, msgs []abi.Message) error {
	names := callNames(msgs)
	var sys []string
	contents := make([]any, 0, len(msgs))
	for _, m := range msgs {
		if m.Role == abi.RoleSystem && len(contents) == 0 {
			sys = append(sys, textOf(m.Content, abi.BlockText))
			continue
		}
		contents = append(contents, geminiContentOf(m, names))
	}
	doc := struct {
		SystemInstruction json.RawMessage `json:"systemInstruction,omitempty"`
		Contents          []any           `json:"contents"`
	}{Contents: contents}
	if len(sys) > 0 {
		b, err := geminiSystemOut(strings.Join(sys, "\n"))
		if err != nil {
			return err
		}
		doc.SystemInstruction = b
	}
	b, err := marshal(doc)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeGeminiAPI puts msgs back into the request: every content msgs hold
// unchanged keeps its bytes (thought signatures and unknown parts with
// it), a changed message is encoded anew, and "systemInstruction" follows
// the system message.
func (r *Request) writeGeminiAPI(msgs []abi.Message) ([]byte, error) {
	names := callNames(msgs)
	items := make([]item, 0, len(r.elems))
	contentsKey, systemKey := "contents", "systemInstruction"
	keys := []string{contentsKey}
	set := map[string][]byte{}
	system := false
	for i := range msgs {
		m := &msgs[i]
		if m.ID == GeminiSystemID {
			system = true
			if src := r.sources[m.ID]; src != nil && m.Role == src.role && sameBlocks(m.Content, src.blocks) {
				continue
			}
			b, err := geminiSystemOut(textOf(m.Content, abi.BlockText))
			if err != nil {
				return nil, err
			}
			keys = append(keys, systemKey)
			set[systemKey] = b
			continue
		}
		if src, ok := r.unchanged(m); ok {
			for _, e := range src.elems {
				items = append(items, r.itemOf(e))
			}
			continue
		}
		b, err := marshal(geminiContentOf(*m, names))
		if err != nil {
			return nil, err
		}
		items = append(items, item{-1, b})
	}
	if !system && r.sources[GeminiSystemID] != nil {
		keys = append(keys, systemKey)
		set[systemKey] = nil
	}
	set[contentsKey] = r.array(items)
	return r.document(keys, set)
}
