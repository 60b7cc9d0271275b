package formats

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/compact-host/compact-host/abi"
)

type anthropicDoc struct {
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

func readAnthropic(r *bufio.Reader, s *Session) error {
	var doc anthropicDoc
	data, err := readDoc(r, Anthropic, &doc)
	if err != nil {
		return err
	}
	req, err := parseRequest(Anthropic, data)
	if err != nil {
		return err
	}
	if len(req.elems) != len(doc.Messages) {
		// Cannot happen: both come from the same "messages" member.
		return &ParseError{Offset: -1, Format: Anthropic, Reason: "the messages array could not be located"}
	}
	if err := refuseOther(Anthropic, find(req.topMs, "system") != nil, len(req.elems), func(i int) json.RawMessage {
		return json.RawMessage(req.bytesOf(req.elems[i]))
	}); err != nil {
		return err
	}
	var msgs []abi.Message
	if sys := find(req.topMs, "system"); sys != nil {
		src, err := req.anthropicSource(sys.val)
		if err != nil {
			return &ParseError{Offset: -1, Format: Anthropic, Reason: "system: " + jsonReason(err), Err: err}
		}
		if len(src.blocks) > 0 {
			src.role = abi.RoleSystem
			msgs = append(msgs, abi.Message{ID: Anthropic + "-system", Role: abi.RoleSystem, Content: cloneBlocks(src.blocks)})
			req.add(Anthropic+"-system", src)
		}
	}
	for i, m := range doc.Messages {
		switch m.Role {
		case abi.RoleUser, abi.RoleAssistant, abi.RoleSystem:
			// The Messages API takes system messages inside "messages"
			// too (Claude Code sends its environment so); they are
			// pinned where they stand.
		default:
			s.Skipped["role/"+m.Role]++
			continue
		}
		var content span
		if ms, err := objectMembers(data, req.elems[i]); err == nil {
			if c := find(ms, "content"); c != nil {
				content = c.val
			}
		}
		src, err := req.anthropicSource(content)
		if err != nil {
			return &ParseError{Offset: -1, Format: Anthropic,
				Reason: fmt.Sprintf("messages[%d].content: %s", i, jsonReason(err)), Err: err}
		}
		src.role, src.elems = m.Role, []int{i}
		if m.Role == abi.RoleSystem && len(src.blocks) == 0 {
			// An empty system message ("content": []) stands as one
			// empty text, so that it is a message and keeps its bytes.
			src.blocks, src.raws = []abi.Block{{Type: abi.BlockText}}, make([]span, 1)
		}
		id := Anthropic + "-" + strconv.Itoa(i)
		msgs = append(msgs, abi.Message{ID: id, Role: m.Role, Content: cloneBlocks(src.blocks), Pinned: m.Role == abi.RoleSystem})
		req.add(id, src)
	}
	finish(s, msgs, Anthropic)
	pinLeadingSystem(s.Messages)
	s.Request = req
	return nil
}

// anthropicSource converts the content (or system) value spanning v: a
// string, or an array of blocks each of which gets a canonical block.
func (r *Request) anthropicSource(v span) (*source, error) {
	src := &source{}
	if v.end == 0 {
		return src, nil
	}
	raw := r.bytesOf(v)
	if blocks, done, err := plainContent(raw); done {
		src.blocks, src.raws, src.stringForm = blocks, make([]span, len(blocks)), raw[0] == '"'
		return src, err
	}
	elems, err := arrayElems(r.doc, v)
	if err != nil {
		return nil, fmt.Errorf("expected a string or an array of blocks, got %s", snippet(raw))
	}
	for _, e := range elems {
		var b apiBlock
		if err := json.Unmarshal(r.bytesOf(e), &b); err != nil {
			return nil, err
		}
		c, _, err := apiBlockOf(b, nil, true)
		if err != nil {
			return nil, err
		}
		src.blocks = append(src.blocks, c)
		src.raws = append(src.raws, e)
	}
	return src, nil
}

func cloneBlocks(b []abi.Block) []abi.Block { return append([]abi.Block(nil), b...) }

// Anthropic request shapes, in the order the API documents their fields.
type (
	anthropicOut struct {
		System   any               `json:"system,omitempty"`
		Messages []anthropicOutMsg `json:"messages"`
	}
	anthropicOutMsg struct {
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	anthropicRawMsg struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	anthropicText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	anthropicThinking struct {
		Type     string `json:"type"`
		Thinking string `json:"thinking"`
	}
	anthropicToolUse struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	anthropicToolResult struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		Content   string `json:"content"`
		IsError   bool   `json:"is_error,omitempty"`
	}
	anthropicImage struct {
		Type   string `json:"type"`
		Source struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      []byte `json:"data"`
		} `json:"source"`
	}
)

// writeAnthropic writes a Messages API request body from canonical
// messages alone. The system messages that open the conversation become
// "system" (a string when there is one text block); a system message later
// in the conversation is written as a user message; consecutive user
// messages of tool results become one. Message IDs, Usage, the Summary
// flag and the Pinned flag of non-system messages are not expressible and
// are lost; thinking blocks are written without a signature (a Request
// read from a file keeps them: see Request.Write).
func writeAnthropic(w io.Writer, msgs []abi.Message) error {
	var out anthropicOut
	out.Messages = make([]anthropicOutMsg, 0, len(msgs))
	i := leadingSystem(msgs)
	if system := anthropicSystem(msgs[:i]); len(system) == 1 {
		out.System = system[0].Text
	} else if len(system) > 1 {
		out.System = system
	}
	for _, m := range mergeResults(msgs[i:], nil) {
		out.Messages = append(out.Messages, anthropicMessage(m))
	}
	return encodeDoc(w, out)
}

func leadingSystem(msgs []abi.Message) int {
	i := 0
	for i < len(msgs) && msgs[i].Role == abi.RoleSystem {
		i++
	}
	return i
}

// anthropicSystem is the text of the leading system messages: the only
// blocks "system" takes.
func anthropicSystem(msgs []abi.Message) []anthropicText {
	var system []anthropicText
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == abi.BlockText {
				system = append(system, anthropicText{Type: "text", Text: b.Text})
			}
		}
	}
	return system
}

func anthropicMessage(m abi.Message) anthropicOutMsg {
	role := m.Role
	if role == abi.RoleSystem {
		role = abi.RoleUser
	}
	om := anthropicOutMsg{Role: role, Content: make([]any, 0, len(m.Content))}
	for _, b := range m.Content {
		if v := anthropicBlock(b); v != nil {
			om.Content = append(om.Content, v)
		}
	}
	return om
}

// anthropicBlock is the API form of a canonical block, nil for a type the
// API has no block for.
func anthropicBlock(b abi.Block) any {
	switch b.Type {
	case abi.BlockText:
		return anthropicText{Type: "text", Text: b.Text}
	case abi.BlockThinking:
		return anthropicThinking{Type: "thinking", Thinking: b.Text}
	case abi.BlockToolUse:
		input := b.Input
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		return anthropicToolUse{Type: "tool_use", ID: b.ID, Name: b.Name, Input: input}
	case abi.BlockToolResult:
		return anthropicToolResult{Type: "tool_result", ToolUseID: b.ToolUseID, Content: b.Text, IsError: b.IsError}
	case abi.BlockImage:
		img := anthropicImage{Type: "image"}
		img.Source.Type = "base64"
		img.Source.MediaType = b.MediaType
		img.Source.Data = b.Data
		return img
	}
	return nil
}

func (r *Request) writeAnthropic(msgs []abi.Message) ([]byte, error) {
	// The leading system messages are the "system" field, but for those
	// read from inside "messages", which go back there.
	i := 0
	for i < len(msgs) && msgs[i].Role == abi.RoleSystem && !r.inMessages(msgs[i].ID) {
		i++
	}
	set := map[string][]byte{}
	sysID := Anthropic + "-system"
	sysSrc := r.sources[sysID]
	switch {
	case i == 0:
		// A system the reader found no text in (null, "") stays as it was.
		if sysSrc != nil {
			set["system"] = nil
		}
	case i == 1 && msgs[0].ID == sysID && sysSrc != nil && sameBlocks(msgs[0].Content, sysSrc.blocks):
		// As read: the bytes stay.
	default:
		var blocks []abi.Block
		for _, m := range msgs[:i] {
			for _, b := range m.Content {
				if b.Type == abi.BlockText {
					blocks = append(blocks, b)
				}
			}
		}
		v, err := r.anthropicContent(blocks, sysSrc, sysSrc == nil || sysSrc.stringForm)
		if err != nil {
			return nil, err
		}
		set["system"] = v
	}
	items := make([]item, 0, len(msgs)-i)
	kept := func(m *abi.Message) bool { _, ok := r.unchanged(m); return ok }
	for _, m := range mergeResults(msgs[i:], kept) {
		if src, ok := r.unchanged(&m); ok {
			items = append(items, r.itemOf(src.elems[0]))
			continue
		}
		b, err := r.anthropicMessage(m)
		if err != nil {
			return nil, err
		}
		items = append(items, item{-1, b})
	}
	set["messages"] = r.array(items)
	return r.document([]string{"system", "messages"}, set)
}

// inMessages reports whether message id was read from an element of
// "messages".
func (r *Request) inMessages(id string) bool {
	src := r.sources[id]
	return src != nil && len(src.elems) > 0
}

// anthropicMessage encodes a message that changed: the source message's
// other fields are kept, its content is rebuilt from the blocks. A system
// message is a user message, but for one read from "messages".
func (r *Request) anthropicMessage(m abi.Message) ([]byte, error) {
	src := r.sources[m.ID]
	if src != nil && len(src.elems) == 0 {
		src = nil
	}
	role := m.Role
	if role == abi.RoleSystem && (src == nil || src.role != abi.RoleSystem) {
		role = abi.RoleUser
	}
	content, err := r.anthropicContent(m.Content, src, src != nil && src.stringForm)
	if err != nil {
		return nil, err
	}
	if src == nil {
		return marshal(anthropicRawMsg{Role: role, Content: content})
	}
	set := map[string][]byte{"content": content}
	if role != src.role {
		set["role"], _ = marshal(role)
	}
	return setMembers(r.doc, r.elems[src.elems[0]], []string{"role", "content"}, set)
}

// anthropicContent encodes blocks as content, each from its source bytes
// where it has them; a lone text block is a string when asString.
func (r *Request) anthropicContent(blocks []abi.Block, src *source, asString bool) ([]byte, error) {
	if asString && len(blocks) == 1 && blocks[0].Type == abi.BlockText {
		return marshal(blocks[0].Text)
	}
	out := []byte{'['}
	used := map[int]bool{}
	for _, b := range blocks {
		raw, ref := r.lookup(b, src, used)
		var err error
		switch {
		case raw != nil:
		case ref != nil && b.Type == abi.BlockToolResult:
			// A pruned result keeps its other fields (cache_control).
			set := map[string][]byte{}
			if set["content"], err = marshal(b.Text); err != nil {
				return nil, err
			}
			if sb := ref.src.blocks[ref.i]; sb.IsError != b.IsError {
				set["is_error"] = nil
				if b.IsError {
					set["is_error"] = []byte("true")
				}
			}
			raw, err = setMembers(r.doc, ref.src.raws[ref.i], []string{"content", "is_error"}, set)
		default:
			v := anthropicBlock(b)
			if v == nil {
				continue
			}
			raw, err = marshal(v)
		}
		if err != nil {
			return nil, err
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, raw...)
	}
	return append(out, ']'), nil
}

func encodeDoc(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	return enc.Encode(v)
}
