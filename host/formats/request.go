package formats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/compact-host/compact-host/abi"
)

// Request is an Anthropic Messages or OpenAI Chat Completions request body
// as Read found it. The canonical messages hold only what compaction needs;
// the Request remembers the bytes of everything else (the model, tools,
// thinking config, metadata, unknown fields, signatures, cache_control,
// tool_call arguments as sent) so that Write can put a compacted
// conversation back into the same request.
//
// A Request is read-only after Read and safe for concurrent use.
type Request struct {
	format string
	doc    []byte
	top    span     // the top-level object within doc
	topMs  []member // its members
	msgs   span     // the "messages" array
	elems  []span   // its elements
	// sources are the canonical messages as the reader made them, before
	// any repair, by message ID.
	sources map[string]*source
	// calls and results find a tool block wherever a repair moved it.
	calls, results map[string]blockRef
}

// source is where one canonical message came from.
type source struct {
	role string
	// elems are the indexes of the elements of "messages" it came from:
	// one, several for a run of OpenAI tool messages, none for Anthropic's
	// system.
	elems   []int
	toolRun bool
	// blocks are the canonical blocks as read; raws[i] spans the source
	// of blocks[i] (a content block, a part, a tool call, a tool
	// message), or is zero when the block came from a string or a field.
	blocks []abi.Block
	raws   []span
	// stringForm is set when the content was a JSON string.
	stringForm bool
}

type blockRef struct {
	src *source
	i   int
}

// Format is the format of the request: Anthropic or OpenAI.
func (r *Request) Format() string { return r.format }

// parseRequest finds the top-level members and the messages of a request
// body.
func parseRequest(format string, doc []byte) (*Request, error) {
	start := skipSpace(doc, 0)
	end, err := skipValue(doc, start)
	if err != nil || doc[start] != '{' {
		return nil, &ParseError{Offset: int64(start), Line: lineOf(doc, int64(start)), Format: format, Reason: "expected a JSON object"}
	}
	r := &Request{format: format, doc: doc, top: span{start, end},
		sources: map[string]*source{}, calls: map[string]blockRef{}, results: map[string]blockRef{}}
	if r.topMs, err = objectMembers(doc, r.top); err != nil {
		return nil, &ParseError{Offset: -1, Format: format, Reason: "expected a JSON object", Err: err}
	}
	key := "messages"
	switch format {
	case Responses:
		key = "input"
	case GeminiAPI:
		key = "contents"
	}
	m := find(r.topMs, key)
	if m == nil {
		return nil, &ParseError{Offset: -1, Format: format,
			Reason: `no "` + key + `" array; a request has one (keys found: ` + keysOf(r.topMs) + ")"}
	}
	r.msgs = m.val
	if r.elems, err = arrayElems(doc, m.val); err != nil {
		return nil, &ParseError{Offset: int64(m.val.start), Line: lineOf(doc, int64(m.val.start)), Format: format,
			Reason: `"` + key + `": expected an array, got ` + snippet(doc[m.val.start:m.val.end])}
	}
	return r, nil
}

func keysOf(ms []member) string {
	var b bytes.Buffer
	for i, m := range ms {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.key)
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// add records where message id came from.
func (r *Request) add(id string, src *source) {
	r.sources[id] = src
	for i, b := range src.blocks {
		switch b.Type {
		case abi.BlockToolUse:
			if _, dup := r.calls[b.ID]; !dup {
				r.calls[b.ID] = blockRef{src, i}
			}
		case abi.BlockToolResult:
			if _, dup := r.results[b.ToolUseID]; !dup {
				r.results[b.ToolUseID] = blockRef{src, i}
			}
		}
	}
}

func (r *Request) bytesOf(s span) []byte { return r.doc[s.start:s.end] }

// item is one element of the "messages" array being written: the bytes of
// element elem as read, or new bytes (elem -1).
type item struct {
	elem int
	b    []byte
}

func (r *Request) itemOf(elem int) item { return item{elem, r.bytesOf(r.elems[elem])} }

// array assembles the "messages" array. Between two elements that were
// neighbours in the source, and around the first and last element, the
// source's own bytes are kept, so an array with nothing changed is
// byte-identical.
func (r *Request) array(items []item) []byte {
	n := 2
	for _, it := range items {
		n += len(it.b) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	last := len(r.elems) - 1
	for k, it := range items {
		switch {
		case k == 0 && it.elem == 0:
			out = append(out, r.doc[r.msgs.start+1:r.elems[0].start]...)
		case k > 0 && it.elem > 0 && items[k-1].elem == it.elem-1:
			out = append(out, r.doc[r.elems[it.elem-1].end:r.elems[it.elem].start]...)
		case k > 0:
			out = append(out, ',')
		}
		out = append(out, it.b...)
	}
	switch {
	case len(items) > 0 && items[len(items)-1].elem == last && last >= 0:
		out = append(out, r.doc[r.elems[last].end:r.msgs.end-1]...)
	case len(items) == 0 && last < 0:
		out = append(out, r.doc[r.msgs.start+1:r.msgs.end-1]...)
	}
	return append(out, ']')
}

// document returns the request with the top-level members in set replaced
// (nil removes one), every other byte kept.
func (r *Request) document(keys []string, set map[string][]byte) ([]byte, error) {
	obj, err := setMembers(r.doc, r.top, keys, set)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(r.doc)-(r.top.end-r.top.start)+len(obj))
	out = append(out, r.doc[:r.top.start]...)
	out = append(out, obj...)
	return append(out, r.doc[r.top.end:]...), nil
}

// Write writes msgs, typically the context of a session read from this
// request after a compaction, as a request in the request's format. Every
// top-level field and every message and block that msgs hold unchanged
// keeps its bytes as read; only what changed (a summary, a pruned tool
// result, a repair the reader made) is encoded anew, and a changed block
// keeps the fields the canonical form does not hold (cache_control,
// is_error, unknown ones). Written with the messages it read, a request
// comes out byte for byte as it came in, unless the reader had to repair
// it.
func (r *Request) Write(w io.Writer, msgs []abi.Message) error {
	var out []byte
	var err error
	switch r.format {
	case Anthropic:
		out, err = r.writeAnthropic(msgs)
	case OpenAI:
		out, err = r.writeOpenAI(msgs)
	case Responses:
		out, err = r.writeResponses(msgs)
	case GeminiAPI:
		out, err = r.writeGeminiAPI(msgs)
	default:
		err = fmt.Errorf("%w %q for a request", ErrUnknownFormat, r.format)
	}
	if err != nil {
		return fmt.Errorf("formats: %s request: %w", r.format, err)
	}
	_, err = w.Write(out)
	return err
}

// ReplaceMessages returns body, a request in format (Anthropic or OpenAI),
// with the first k elements of its "messages" array replaced by msgs,
// encoded in that format. Every other byte of body is kept: the other
// top-level fields, the messages after the first k and the whitespace
// between them. It is what a proxy needs to put a summary in place of the
// messages it folds; msgs of the system role are written as user messages
// (a request's system prompt is its own field, which this leaves alone).
func ReplaceMessages(format string, body []byte, k int, msgs []abi.Message) ([]byte, error) {
	if format != Anthropic && format != OpenAI {
		return nil, fmt.Errorf("%w %q for a request; want %s or %s", ErrUnknownFormat, format, Anthropic, OpenAI)
	}
	if !json.Valid(body) {
		return nil, &ParseError{Offset: -1, Format: format, Reason: "the request is not valid JSON"}
	}
	r, err := parseRequest(format, body)
	if err != nil {
		return nil, err
	}
	if k < 0 || k > len(r.elems) {
		return nil, fmt.Errorf("formats: replacing the first %d messages of a request that has %d", k, len(r.elems))
	}
	items := make([]item, 0, len(msgs)+len(r.elems)-k)
	switch format {
	case Anthropic:
		for _, m := range mergeResults(msgs, nil) {
			b, err := marshal(anthropicMessage(m))
			if err != nil {
				return nil, err
			}
			items = append(items, item{-1, b})
		}
	case OpenAI:
		for _, m := range msgs {
			for _, v := range openAIMessages(m) {
				b, err := marshal(v)
				if err != nil {
					return nil, err
				}
				items = append(items, item{-1, b})
			}
		}
	}
	for i := k; i < len(r.elems); i++ {
		items = append(items, r.itemOf(i))
	}
	return applyPatches(body, []patch{{r.msgs, r.array(items)}}), nil
}

// unchanged reports whether m is the message its source holds, so the
// source's bytes stand for it.
func (r *Request) unchanged(m *abi.Message) (*source, bool) {
	src := r.sources[m.ID]
	return src, src != nil && len(src.elems) > 0 && m.Role == src.role && sameBlocks(m.Content, src.blocks)
}

// lookup finds the source bytes of block b: first an unused equal block of
// the message's own source, then the tool block with b's ID wherever it
// was. raw is nil when no source block equals b; ref is then set when a
// tool block of that ID exists but differs (a pruned result).
func (r *Request) lookup(b abi.Block, src *source, used map[int]bool) (raw []byte, ref *blockRef) {
	if src != nil {
		for j, sb := range src.blocks {
			if !used[j] && src.raws[j].end > 0 && sameBlock(sb, b) {
				used[j] = true
				return r.bytesOf(src.raws[j]), nil
			}
		}
	}
	var br blockRef
	var ok bool
	switch b.Type {
	case abi.BlockToolUse:
		br, ok = r.calls[b.ID]
	case abi.BlockToolResult:
		br, ok = r.results[b.ToolUseID]
	}
	if !ok || br.src.raws[br.i].end == 0 {
		return nil, nil
	}
	if sameBlock(br.src.blocks[br.i], b) {
		return r.bytesOf(br.src.raws[br.i]), nil
	}
	return nil, &br
}

func sameBlocks(a, b []abi.Block) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameBlock(a[i], b[i]) {
			return false
		}
	}
	return true
}

func sameBlock(a, b abi.Block) bool {
	return a.Type == b.Type && a.Text == b.Text && a.ID == b.ID && a.Name == b.Name &&
		bytes.Equal(a.Input, b.Input) && a.ToolUseID == b.ToolUseID && a.IsError == b.IsError &&
		a.MediaType == b.MediaType && bytes.Equal(a.Data, b.Data)
}

// mergeResults joins consecutive user messages that hold tool results into
// one, results first: the Messages API wants every result of an assistant
// message's parallel calls in the one user message after it. Messages
// kept(m) says to write as read are left alone.
func mergeResults(msgs []abi.Message, kept func(m *abi.Message) bool) []abi.Message {
	hasResults := func(m *abi.Message) bool {
		return m.Role == abi.RoleUser && (kept == nil || !kept(m)) &&
			len(m.Content) > 0 && m.Content[0].Type == abi.BlockToolResult
	}
	out := make([]abi.Message, 0, len(msgs))
	for i := range msgs {
		m := msgs[i]
		if n := len(out); n > 0 && hasResults(&out[n-1]) && hasResults(&m) {
			prev := &out[n-1]
			merged := make([]abi.Block, 0, len(prev.Content)+len(m.Content))
			split := func(c []abi.Block) (res, rest []abi.Block) {
				k := 0
				for k < len(c) && c[k].Type == abi.BlockToolResult {
					k++
				}
				return c[:k], c[k:]
			}
			r1, rest1 := split(prev.Content)
			r2, rest2 := split(m.Content)
			merged = append(append(append(append(merged, r1...), r2...), rest1...), rest2...)
			prev.Content = merged
			continue
		}
		out = append(out, m)
	}
	return out
}
