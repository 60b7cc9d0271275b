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
// ID; keep is as for oaParts.
func oaMessages(in []oaMessage, ids func(i int) string, skipped map[string]int, keep bool) ([]abi.Message, error) {
	var out []abi.Message
	results := -1 // index in out of the user message collecting tool results
	lastFunctionCall := ""
	for i, m := range in {
		var err error
		var blocks []abi.Block
		switch m.Role {
		case "system", "developer":
			results = -1
			if blocks, err = oaContent(m.Content, skipped, keep); err != nil {
				return nil, fmt.Errorf("messages[%d].content: %s", i, jsonReason(err))
			}
			out = append(out, abi.Message{ID: ids(i), Role: abi.RoleSystem, Content: blocks})
		case "user":
			results = -1
			if blocks, err = oaContent(m.Content, skipped, keep); err != nil {
				return nil, fmt.Errorf("messages[%d].content: %s", i, jsonReason(err))
			}
			out = append(out, abi.Message{ID: ids(i), Role: abi.RoleUser, Content: blocks})
		case "assistant":
			results = -1
			if m.ReasoningContent != "" {
				blocks = append(blocks, abi.Block{Type: abi.BlockThinking, Text: m.ReasoningContent})
			}
			text, err := oaContent(m.Content, skipped, keep)
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
			content, err := oaContent(m.Content, skipped, keep)
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
	data, err := readDoc(r, OpenAI, &doc)
	if err != nil {
		return err
	}
	req, err := parseRequest(OpenAI, data)
	if err != nil {
		return err
	}
	if len(req.elems) != len(doc.Messages) {
		// Cannot happen: both come from the same "messages" member.
		return &ParseError{Offset: -1, Format: OpenAI, Reason: "the messages array could not be located"}
	}
	if err := refuseOther(OpenAI, find(req.topMs, "system") != nil, len(req.elems), func(i int) json.RawMessage {
		return json.RawMessage(req.bytesOf(req.elems[i]))
	}); err != nil {
		return err
	}
	msgs, err := oaMessages(doc.Messages, func(i int) string { return OpenAI + "-" + strconv.Itoa(i) }, s.Skipped, true)
	if err != nil {
		return &ParseError{Offset: -1, Format: OpenAI, Reason: err.Error()}
	}
	for i := range msgs {
		req.openAISource(&msgs[i], doc.Messages)
		msgs[i].Content = cloneBlocks(msgs[i].Content)
	}
	finish(s, msgs, OpenAI)
	pinLeadingSystem(s.Messages)
	s.Request = req
	return nil
}

// openAISource records where m, made by oaMessages from in, came from.
func (r *Request) openAISource(m *abi.Message, in []oaMessage) {
	i, err := strconv.Atoi(strings.TrimPrefix(m.ID, OpenAI+"-"))
	if err != nil || i < 0 || i >= len(in) {
		return
	}
	src := &source{role: m.Role, blocks: m.Content, raws: make([]span, len(m.Content))}
	ms, _ := objectMembers(r.doc, r.elems[i])
	switch in[i].Role {
	case "tool", "function":
		src.toolRun = true
		for k := range m.Content {
			if i+k >= len(in) || (in[i+k].Role != "tool" && in[i+k].Role != "function") {
				return
			}
			src.elems = append(src.elems, i+k)
			src.raws[k] = r.elems[i+k]
		}
	default:
		src.elems = []int{i}
		k := 0
		if in[i].Role == "assistant" && in[i].ReasoningContent != "" {
			k++ // from the reasoning_content field: no bytes of its own
		}
		if c := find(ms, "content"); c != nil {
			if r.doc[c.val.start] == '"' {
				src.stringForm = true
				if c.val.end-c.val.start > 2 {
					k++ // a non-empty string is one text block
				}
			} else if parts, err := arrayElems(r.doc, c.val); err == nil {
				for _, p := range parts {
					if k < len(src.raws) {
						src.raws[k] = p
					}
					k++
				}
			}
		}
		if c := find(ms, "tool_calls"); c != nil {
			if calls, err := arrayElems(r.doc, c.val); err == nil {
				for _, c := range calls {
					if k < len(src.raws) && m.Content[k].Type == abi.BlockToolUse {
						src.raws[k] = c
					}
					k++
				}
			}
		}
	}
	r.add(m.ID, src)
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

// writeOpenAI writes a Chat Completions request body from canonical
// messages alone. Tool results become role "tool" messages, written before
// the rest of their user message; thinking becomes reasoning_content. Lost:
// message IDs, Usage, the Summary flag, the Pinned flag of non-system
// messages, is_error on tool results, and the order of text and tool calls
// within an assistant message (text first).
func writeOpenAI(w io.Writer, msgs []abi.Message) error {
	out := openAIOut{Messages: make([]any, 0, len(msgs))}
	for _, m := range msgs {
		out.Messages = append(out.Messages, openAIMessages(m)...)
	}
	return encodeDoc(w, out)
}

// openAIMessages is the Chat Completions form of one canonical message:
// one message, or tool messages and then a user message for a user
// message with tool results.
func openAIMessages(m abi.Message) []any {
	switch m.Role {
	case abi.RoleSystem:
		return []any{openAIText{Role: "system", Content: openAIContent(m.Content)}}
	case abi.RoleUser:
		var out []any
		var rest []abi.Block
		for _, b := range m.Content {
			if b.Type == abi.BlockToolResult {
				out = append(out, openAITool{Role: "tool", ToolCallID: b.ToolUseID, Content: b.Text})
			} else {
				rest = append(rest, b)
			}
		}
		if len(rest) > 0 {
			out = append(out, openAIText{Role: "user", Content: openAIContent(rest)})
		}
		return out
	case abi.RoleAssistant:
		a := openAIAssistant{Role: "assistant"}
		var thinking []string
		var text []abi.Block
		for _, b := range m.Content {
			switch b.Type {
			case abi.BlockThinking:
				thinking = append(thinking, b.Text)
			case abi.BlockToolUse:
				a.ToolCalls = append(a.ToolCalls, openAICall(b))
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
		return []any{a}
	}
	return nil
}

func openAICall(b abi.Block) openAIToolCall {
	var c openAIToolCall
	c.ID, c.Type = b.ID, "function"
	c.Function.Name = b.Name
	c.Function.Arguments = string(b.Input)
	if len(b.Input) == 0 {
		c.Function.Arguments = "{}"
	}
	return c
}

// openAIContent is a plain string for a single text block, else an array of
// parts.
func openAIContent(blocks []abi.Block) any {
	if len(blocks) == 1 && blocks[0].Type == abi.BlockText {
		return blocks[0].Text
	}
	parts := make([]openAIPart, 0, len(blocks))
	for _, b := range blocks {
		if p, ok := openAIPartOf(b); ok {
			parts = append(parts, p)
		}
	}
	return parts
}

func openAIPartOf(b abi.Block) (openAIPart, bool) {
	switch b.Type {
	case abi.BlockImage:
		p := openAIPart{Type: "image_url"}
		p.ImageURL = &struct {
			URL string `json:"url"`
		}{dataURL(b)}
		return p, true
	case abi.BlockText, abi.BlockThinking:
		return openAIPart{Type: "text", Text: b.Text}, true
	}
	return openAIPart{}, false
}

func (r *Request) writeOpenAI(msgs []abi.Message) ([]byte, error) {
	items := make([]item, 0, len(msgs))
	fresh := func(v any) error {
		b, err := marshal(v)
		items = append(items, item{-1, b})
		return err
	}
	for _, m := range msgs {
		src, ok := r.unchanged(&m)
		if ok {
			for _, e := range src.elems {
				items = append(items, r.itemOf(e))
			}
			continue
		}
		if src != nil && (src.toolRun || len(src.elems) != 1) {
			src = nil
		}
		switch m.Role {
		case abi.RoleSystem:
			b, err := r.openAIText("system", m, m.Content, src)
			if err != nil {
				return nil, err
			}
			items = append(items, item{-1, b})
		case abi.RoleUser:
			var rest []abi.Block
			for _, b := range m.Content {
				if b.Type != abi.BlockToolResult {
					rest = append(rest, b)
					continue
				}
				raw, ref := r.lookup(b, nil, nil)
				switch {
				case raw != nil && r.results[b.ToolUseID].src.toolRun:
					ref := r.results[b.ToolUseID]
					items = append(items, r.itemOf(ref.src.elems[ref.i]))
				case raw != nil:
					items = append(items, item{-1, raw})
				case ref != nil:
					// A pruned result keeps the tool message's other fields.
					content, err := marshal(b.Text)
					if err != nil {
						return nil, err
					}
					nb, err := setMembers(r.doc, ref.src.raws[ref.i], []string{"content"}, map[string][]byte{"content": content})
					if err != nil {
						return nil, err
					}
					items = append(items, item{-1, nb})
				default:
					if err := fresh(openAITool{Role: "tool", ToolCallID: b.ToolUseID, Content: b.Text}); err != nil {
						return nil, err
					}
				}
			}
			if len(rest) > 0 {
				b, err := r.openAIText("user", m, rest, src)
				if err != nil {
					return nil, err
				}
				items = append(items, item{-1, b})
			}
		case abi.RoleAssistant:
			b, err := r.openAIAssistant(m, src)
			if err != nil {
				return nil, err
			}
			items = append(items, item{-1, b})
		}
	}
	return r.document([]string{"messages"}, map[string][]byte{"messages": r.array(items)})
}

// openAIText encodes a system or user message with content blocks; a
// source message keeps its other fields (name, unknown ones).
func (r *Request) openAIText(role string, m abi.Message, blocks []abi.Block, src *source) ([]byte, error) {
	if src == nil {
		return marshal(openAIText{Role: role, Content: openAIContent(blocks)})
	}
	content, err := r.openAIParts(blocks, src)
	if err != nil {
		return nil, err
	}
	set := map[string][]byte{"content": content}
	if m.Role != src.role {
		set["role"], _ = marshal(role)
	}
	return setMembers(r.doc, r.elems[src.elems[0]], []string{"role", "content"}, set)
}

// openAIParts encodes content from blocks, each part from its source bytes
// where it has them.
func (r *Request) openAIParts(blocks []abi.Block, src *source) ([]byte, error) {
	if (src == nil || src.stringForm) && len(blocks) == 1 && blocks[0].Type == abi.BlockText {
		return marshal(blocks[0].Text)
	}
	out := []byte{'['}
	used := map[int]bool{}
	for _, b := range blocks {
		raw, _ := r.lookup(b, src, used)
		if raw == nil {
			p, ok := openAIPartOf(b)
			if !ok {
				continue
			}
			var err error
			if raw, err = marshal(p); err != nil {
				return nil, err
			}
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, raw...)
	}
	return append(out, ']'), nil
}

// openAIAssistant encodes an assistant message that changed. A source
// message keeps every field whose part of the content did not change.
func (r *Request) openAIAssistant(m abi.Message, src *source) ([]byte, error) {
	if src == nil {
		return marshal(openAIMessages(m)[0])
	}
	group := func(blocks []abi.Block) (thinking, text, calls []abi.Block) {
		for _, b := range blocks {
			switch b.Type {
			case abi.BlockThinking:
				thinking = append(thinking, b)
			case abi.BlockToolUse:
				calls = append(calls, b)
			default:
				text = append(text, b)
			}
		}
		return thinking, text, calls
	}
	thinking, text, calls := group(m.Content)
	srcThinking, srcText, srcCalls := group(src.blocks)
	set := map[string][]byte{}
	var err error
	if !sameBlocks(thinking, srcThinking) {
		set["reasoning_content"] = nil
		if len(thinking) > 0 {
			parts := make([]string, len(thinking))
			for i, b := range thinking {
				parts[i] = b.Text
			}
			if set["reasoning_content"], err = marshal(strings.Join(parts, "\n\n")); err != nil {
				return nil, err
			}
		}
	}
	if !sameBlocks(text, srcText) {
		switch {
		case len(text) > 0:
			set["content"], err = r.openAIParts(text, src)
		case len(calls) > 0:
			set["content"] = []byte("null")
		default:
			set["content"] = []byte(`""`)
		}
		if err != nil {
			return nil, err
		}
	}
	if !sameBlocks(calls, srcCalls) {
		set["tool_calls"] = nil
		if len(calls) > 0 {
			out := []byte{'['}
			for _, b := range calls {
				raw, _ := r.lookup(b, src, map[int]bool{})
				if raw == nil {
					if raw, err = marshal(openAICall(b)); err != nil {
						return nil, err
					}
				}
				if len(out) > 1 {
					out = append(out, ',')
				}
				out = append(out, raw...)
			}
			set["tool_calls"] = append(out, ']')
		}
	}
	return setMembers(r.doc, r.elems[src.elems[0]], []string{"content", "reasoning_content", "tool_calls"}, set)
}
