package formats

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/compact-host/compact-host/abi"
)

// responsesItem is an item of a Responses API request's "input". Content
// is raw: a message's content is a string or a list of parts.
type responsesItem struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Summary          []oaPart        `json:"summary"`
	EncryptedContent *string         `json:"encrypted_content"`
	Name             string          `json:"name"`
	Arguments        json.RawMessage `json:"arguments"`
	Input            json.RawMessage `json:"input"`
	CallID           string          `json:"call_id"`
	Output           json.RawMessage `json:"output"`
}

// ResponsesInstructionsID is the ID of the pinned system message a
// Responses request's "instructions" become.
const ResponsesInstructionsID = Responses + "-instructions"

// readResponses reads a Responses API request. "instructions" become a
// pinned system message; the items of "input" are grouped as Codex
// records them: the items of one model turn (reasoning, assistant
// messages, calls) form one assistant message, consecutive call outputs
// one user message of tool results. Every item belongs to exactly one
// message, whose ID names its first item ("responses-<index>"): an item
// with no canonical content (an encrypted reasoning item, an unknown item
// type) joins the message that follows it, so a reasoning item is never
// parted from the item it precedes. A compaction item (the provider's
// encrypted summary) becomes a user message marked Summary and Pinned.
func readResponses(r *bufio.Reader, s *Session) error {
	var doc struct {
		Instructions json.RawMessage `json:"instructions"`
		Input        json.RawMessage `json:"input"`
	}
	data, err := readDoc(r, Responses, &doc)
	if err != nil {
		return err
	}
	if in := bytes.TrimSpace(doc.Input); len(in) > 0 && in[0] == '"' {
		return &ParseError{Offset: -1, Format: Responses,
			Reason: `"input" is a string, not a list of items; such a request holds one message and nothing to compact`}
	}
	req, err := parseRequest(Responses, data)
	if err != nil {
		return err
	}
	b := newCodexBuilder(s.Skipped)
	starts := []int{} // first item of each message b holds
	if ins := bytes.TrimSpace(doc.Instructions); len(ins) > 0 && string(ins) != "null" {
		var text string
		if err := decode(ins, &text); err != nil {
			return &ParseError{Offset: -1, Format: Responses, Reason: `"instructions": expected a string`}
		}
		if text != "" {
			b.add(abi.RoleSystem, ResponsesInstructionsID, abi.Block{Type: abi.BlockText, Text: text})
			starts = append(starts, -1)
		}
	}
	pending := -1 // first item waiting for the message it joins
	for i, e := range req.elems {
		var it responsesItem
		if err := decodeChecked(req.bytesOf(e), &it); err != nil {
			return &ParseError{Offset: int64(e.start), Line: lineOf(data, int64(e.start)), Format: Responses,
				Reason: fmt.Sprintf("input[%d]: %s", i, jsonReason(err))}
		}
		first := i
		if pending >= 0 {
			first = pending
		}
		n, blocks := len(b.msgs), b.blockCount()
		if err := b.responsesItem(&it, Responses+"-"+strconv.Itoa(first)); err != nil {
			return &ParseError{Offset: int64(e.start), Line: lineOf(data, int64(e.start)), Format: Responses,
				Reason: fmt.Sprintf("input[%d]: %s", i, err)}
		}
		switch {
		case len(b.msgs) > n:
			starts = append(starts, first)
			pending = -1
		case b.blockCount() > blocks:
			pending = -1
		case pending < 0 && b.assistant < 0:
			// Inside a model turn the item stays with the turn; elsewhere
			// it joins the message that follows.
			pending = i
		}
	}
	msgs := b.msgs
	for k := range msgs {
		src := &source{role: msgs[k].Role, blocks: msgs[k].Content, raws: make([]span, len(msgs[k].Content))}
		if starts[k] >= 0 {
			end := len(req.elems)
			if k+1 < len(msgs) {
				end = starts[k+1]
			}
			for e := starts[k]; e < end; e++ {
				src.elems = append(src.elems, e)
			}
		}
		req.add(msgs[k].ID, src)
		msgs[k].Content = cloneBlocks(msgs[k].Content)
	}
	finish(s, msgs, Responses)
	pinLeadingSystem(s.Messages)
	s.Request = req
	return nil
}

// blockCount is the number of blocks b holds.
func (b *codexBuilder) blockCount() int {
	n := 0
	for i := range b.msgs {
		n += len(b.msgs[i].Content)
	}
	return n
}

// responsesItem adds one item of a Responses request under the message ID
// id.
func (b *codexBuilder) responsesItem(it *responsesItem, id string) error {
	switch it.Type {
	case "message", "":
		blocks, err := oaContent(it.Content, b.skipped, true)
		if err != nil {
			return fmt.Errorf("content: %s", jsonReason(err))
		}
		if !b.message(it.Role, id, blocks) {
			return fmt.Errorf("message role %q; want user, assistant, system or developer", it.Role)
		}
	case "reasoning":
		var content []oaPart
		if len(it.Content) > 0 && string(bytes.TrimSpace(it.Content)) != "null" {
			if err := decode(it.Content, &content); err != nil {
				return fmt.Errorf("reasoning content: %s", jsonReason(err))
			}
		}
		text := append(oaParts(it.Summary, b.skipped, false), oaParts(content, b.skipped, false)...)
		if len(text) == 0 {
			// Encrypted or empty: the provider drops earlier turns'
			// reasoning from the context, so it counts for nothing, but
			// it stays with the turn it belongs to.
			text = []abi.Block{{}}
		}
		for _, t := range text {
			b.assistantBlock(id, abi.Block{Type: abi.BlockThinking, Text: t.Text})
		}
	case "function_call":
		b.assistantBlock(id, abi.Block{Type: abi.BlockToolUse, ID: it.CallID, Name: it.Name, Input: objectInput(it.Arguments)})
	case "custom_tool_call":
		b.assistantBlock(id, abi.Block{Type: abi.BlockToolUse, ID: it.CallID, Name: it.Name, Input: objectInput(it.Input)})
	case "function_call_output", "custom_tool_call_output":
		text, err := codexOutput(it.Output, b.skipped)
		if err != nil {
			return fmt.Errorf("%s output: %s", it.Type, jsonReason(err))
		}
		if b.results < 0 {
			b.add(abi.RoleUser, id)
			b.assistant, b.results = -1, len(b.msgs)-1
		}
		m := &b.msgs[b.results]
		m.Content = append(m.Content, abi.Block{Type: abi.BlockToolResult, ToolUseID: it.CallID, Text: text})
	case "compaction", "compaction_summary":
		b.close()
		text := "[compaction]"
		if it.EncryptedContent != nil {
			// The summary is encrypted; its length stands in for its size.
			text = "[compaction: " + strconv.Itoa(len(*it.EncryptedContent)) + " bytes encrypted]"
		}
		b.add(abi.RoleUser, id, abi.Block{Type: abi.BlockText, Text: text})
		// Pinned: only the provider can read it, so no summary of ours can
		// stand for it, and dropping it loses what it holds.
		b.msgs[len(b.msgs)-1].Summary = true
		b.msgs[len(b.msgs)-1].Pinned = true
	default:
		// Hosted tool calls (web search, file search...), item
		// references and types to come: kept as sent, counted here.
		b.skipped[it.Type]++
	}
	return nil
}

// Responses API request item shapes, as the writers make them.
type (
	responsesMessage struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content []responsesPart `json:"content"`
	}
	responsesPart struct {
		Type     string `json:"type"`
		Text     string `json:"text,omitempty"`
		ImageURL string `json:"image_url,omitempty"`
	}
	responsesReasoning struct {
		Type    string          `json:"type"`
		Summary []responsesPart `json:"summary"`
	}
	responsesCall struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	responsesOutput struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
)

// ResponsesItems encodes m as items of a Responses request's "input":
// a system message as a developer message; a user message's tool results
// as function_call_output items before a message with the rest; an
// assistant message's thinking as reasoning items with a summary, its
// text as assistant messages and its calls as function_call items, in the
// order of its blocks.
func ResponsesItems(m abi.Message) []any {
	var out []any
	var parts []responsesPart
	role := m.Role
	if role == abi.RoleSystem {
		role = "developer"
	}
	flush := func() {
		if len(parts) > 0 {
			out = append(out, responsesMessage{Type: "message", Role: role, Content: parts})
			parts = nil
		}
	}
	textType := "input_text"
	if m.Role == abi.RoleAssistant {
		textType = "output_text"
	}
	for _, b := range m.Content {
		switch b.Type {
		case abi.BlockText:
			parts = append(parts, responsesPart{Type: textType, Text: b.Text})
		case abi.BlockImage:
			parts = append(parts, responsesPart{Type: "input_image", ImageURL: dataURL(b)})
		case abi.BlockThinking:
			flush()
			r := responsesReasoning{Type: "reasoning", Summary: []responsesPart{}}
			if b.Text != "" {
				r.Summary = append(r.Summary, responsesPart{Type: "summary_text", Text: b.Text})
			}
			out = append(out, r)
		case abi.BlockToolUse:
			flush()
			out = append(out, responsesCall{Type: "function_call", CallID: b.ID, Name: b.Name, Arguments: string(b.Input)})
		case abi.BlockToolResult:
			flush()
			out = append(out, responsesOutput{Type: "function_call_output", CallID: b.ToolUseID, Output: b.Text})
		}
	}
	flush()
	return out
}

// writeResponses writes a Responses request body, {"input":[...]}, from
// canonical messages alone. Lost: message IDs, Usage, the Summary flag,
// the Pinned flag of non-system messages, is_error, reasoning's encrypted
// content, and the kind of a call (custom tool calls come back as
// function calls).
func writeResponses(w io.Writer, msgs []abi.Message) error {
	items := make([]any, 0, len(msgs))
	for _, m := range msgs {
		items = append(items, ResponsesItems(m)...)
	}
	b, err := marshal(struct {
		Input []any `json:"input"`
	}{items})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeResponses puts msgs back into the request: the items of every
// message msgs hold unchanged keep their bytes (reasoning with its
// encrypted content, unknown items included), a changed message is
// encoded anew, and "instructions" follow the instructions message.
func (r *Request) writeResponses(msgs []abi.Message) ([]byte, error) {
	items := make([]item, 0, len(r.elems))
	keys := []string{"input"}
	set := map[string][]byte{}
	instructions := false
	for i := range msgs {
		m := &msgs[i]
		if m.ID == ResponsesInstructionsID {
			instructions = true
			if src := r.sources[m.ID]; src != nil && m.Role == src.role && sameBlocks(m.Content, src.blocks) {
				continue
			}
			b, err := marshal(textOf(m.Content, abi.BlockText))
			if err != nil {
				return nil, err
			}
			keys = append(keys, "instructions")
			set["instructions"] = b
			continue
		}
		if src, ok := r.unchanged(m); ok {
			for _, e := range src.elems {
				items = append(items, r.itemOf(e))
			}
			continue
		}
		for _, v := range ResponsesItems(*m) {
			b, err := marshal(v)
			if err != nil {
				return nil, err
			}
			items = append(items, item{-1, b})
		}
	}
	if !instructions && r.sources[ResponsesInstructionsID] != nil {
		keys = append(keys, "instructions")
		set["instructions"] = nil
	}
	set["input"] = r.array(items)
	return r.document(keys, set)
}
