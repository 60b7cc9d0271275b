package formats

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/compact-host/compact-host/abi"
)

type codexLine struct {
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	Timestamp borrowedRaw     `json:"timestamp"` // read for the usage only
}

// codexItem is a Responses API item as Codex records it (response_item
// payloads and the entries of a compacted record's replacement_history).
type codexItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Role             string          `json:"role"`
	Content          []oaPart        `json:"content"`
	Summary          []oaPart        `json:"summary"`
	EncryptedContent *string         `json:"encrypted_content"`
	Name             string          `json:"name"`
	Arguments        json.RawMessage `json:"arguments"`
	Input            json.RawMessage `json:"input"`
	Action           json.RawMessage `json:"action"`
	CallID           string          `json:"call_id"`
	Output           json.RawMessage `json:"output"`
}

type codexTokenCount struct {
	Info *struct {
		Total borrowedRaw `json:"total_token_usage"` // read for the usage only
		Last  *struct {
			InputTokens       int `json:"input_tokens"`
			CachedInputTokens int `json:"cached_input_tokens"`
			OutputTokens      int `json:"output_tokens"`
		} `json:"last_token_usage"`
	} `json:"info"`
}

// codexBuilder groups Codex items into messages: the items of one model
// response (reasoning, messages, calls) form one assistant message, and
// consecutive call outputs one user message.
type codexBuilder struct {
	msgs      []abi.Message
	assistant int // index of the open assistant message, -1 if none
	results   int // index of the open tool-results message, -1 if none
	usage     int // assistant message waiting for its token_count, -1 if none
	skipped   map[string]int
	// line is the line being read, and tr where messages come from (nil
	// when nobody asks).
	line int
	tr   *sourceLines
}

func newCodexBuilder(skipped map[string]int) *codexBuilder {
	return &codexBuilder{assistant: -1, results: -1, usage: -1, skipped: skipped}
}

func (b *codexBuilder) close() { b.assistant, b.results = -1, -1 }

func (b *codexBuilder) add(role, id string, blocks ...abi.Block) {
	b.msgs = append(b.msgs, abi.Message{ID: id, Role: role, Content: blocks})
	b.tr.open(id, b.line)
}

// assistantBlock adds a block to the open assistant message, opening one
// if needed.
// message adds a message item of role; false for a role the Responses
// item format does not have.
func (b *codexBuilder) message(role, id string, blocks []abi.Block) bool {
	switch role {
	case "assistant":
		for _, blk := range blocks {
			b.assistantBlock(id, blk)
		}
	case "user":
		b.close()
		b.add(abi.RoleUser, id, blocks...)
	case "developer", "system":
		b.close()
		b.add(abi.RoleSystem, id, blocks...)
	default:
		return false
	}
	return true
}

func (b *codexBuilder) assistantBlock(id string, blk abi.Block) {
	if b.assistant < 0 {
		b.add(abi.RoleAssistant, id)
		b.assistant, b.results, b.usage = len(b.msgs)-1, -1, len(b.msgs)-1
	}
	m := &b.msgs[b.assistant]
	m.Content = append(m.Content, blk)
}

// item adds one Responses item. id names a message the item opens when the
// item has no ID of its own.
func (b *codexBuilder) item(it *codexItem, id string) error {
	if it.ID != "" && (it.Type != "message" || it.Role == "assistant") {
		id = it.ID
	}
	switch it.Type {
	case "message":
		blocks := oaParts(it.Content, b.skipped, false)
		if !b.message(it.Role, id, blocks) {
			b.skipped["message/"+it.Role]++
		}
	case "reasoning":
		text := append(oaParts(it.Summary, b.skipped, false), oaParts(it.Content, b.skipped, false)...)
		if len(text) == 0 {
			b.skipped["reasoning (encrypted)"]++
			return nil
		}
		for _, t := range text {
			b.assistantBlock(id, abi.Block{Type: abi.BlockThinking, Text: t.Text})
		}
	case "function_call":
		b.assistantBlock(id, abi.Block{Type: abi.BlockToolUse, ID: it.CallID, Name: it.Name, Input: objectInput(it.Arguments)})
	case "custom_tool_call":
		b.assistantBlock(id, abi.Block{Type: abi.BlockToolUse, ID: it.CallID, Name: it.Name, Input: objectInput(it.Input)})
	case "local_shell_call":
		b.assistantBlock(id, abi.Block{Type: abi.BlockToolUse, ID: it.CallID, Name: "local_shell", Input: objectInput(it.Action)})
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
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
	case "compaction":
		// The agent's summary, encrypted: nothing readable to keep.
		b.skipped["compaction (encrypted)"]++
	default:
		b.skipped[it.Type]++
	}
	return nil
}

// codexOutput flattens a call output: a string, a list of content items, or
// an object with an "output" or "content" string.
func codexOutput(raw json.RawMessage, skipped map[string]int) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		err := decode(raw, &s)
		return s, err
	case '[':
		var parts []oaPart
		if err := decode(raw, &parts); err != nil {
			return "", err
		}
		return flatten(oaParts(parts, skipped, false)), nil
	case '{':
		var o struct {
			Output  *string `json:"output"`
			Content *string `json:"content"`
		}
		if err := decode(raw, &o); err == nil {
			if o.Output != nil {
				return *o.Output, nil
			}
			if o.Content != nil {
				return *o.Content, nil
			}
		}
	}
	return string(raw), nil
}

// readCodex reads a Codex CLI rollout. The base instructions of session_meta
// become the system message; developer messages become system messages.
// event_msg lines mostly repeat the response items for the UI and are
// skipped, except token_count, whose last_token_usage becomes the Usage of
// the assistant message it follows. A compacted record becomes an
// AgentCompaction with its replacement history; the user message in it
// that carries the record's summary message is marked as the summary
// (Message.Summary), where Codex put it.
func readCodex(r *bufio.Reader, s *Session) error {
	return readCodexTracked(r, s, nil)
}

func readCodexTracked(r *bufio.Reader, s *Session, tr *sourceLines) error {
	b := newCodexBuilder(s.Skipped)
	b.tr = tr
	bill := startBilling(s, Codex)
	lastCompacted := 0 // the line of the latest compacted record
	err := readJSONL(r, Codex, func(line []byte, n int) error {
		b.line = n
		var l codexLine
		if err := decode(line, &l); err != nil {
			return err
		}
		id := Codex + "-" + strconv.Itoa(n)
		if l.Type != "" && (len(l.Payload) == 0 || l.Payload[0] != '{') {
			return fmt.Errorf("%s record: expected a JSON object in \"payload\"", l.Type)
		}
		switch l.Type {
		case "session_meta":
			var meta struct {
				Instructions     string `json:"instructions"`
				BaseInstructions *struct {
					Text string `json:"text"`
				} `json:"base_instructions"`
			}
			if err := decodeChecked(l.Payload, &meta); err != nil {
				return fmt.Errorf("session_meta: %s", jsonReason(err))
			}
			text := meta.Instructions
			if meta.BaseInstructions != nil && meta.BaseInstructions.Text != "" {
				text = meta.BaseInstructions.Text
			}
			if text != "" {
				b.close()
				b.add(abi.RoleSystem, id, abi.Block{Type: abi.BlockText, Text: text})
				if len(b.msgs) == 1 {
					s.ownInstructions = 1 // sent as the request's instructions
				}
			}
		case "response_item":
			var it codexItem
			if err := decodeChecked(l.Payload, &it); err != nil {
				return fmt.Errorf("response_item: %s", jsonReason(err))
			}
			tr.item(n)
			return b.item(&it, id)
		case "compacted":
			var c struct {
				Message     string      `json:"message"`
				Replacement []codexItem `json:"replacement_history"`
				Appended    *Appended   `json:"compact_host_appended"`
			}
			if err := decodeChecked(l.Payload, &c); err != nil {
				return fmt.Errorf("compacted: %s", jsonReason(err))
			}
			b.close()
			b.usage = -1
			rb := newCodexBuilder(s.Skipped)
			if tr != nil {
				// The items of the latest compacted record are where the
				// live context comes from: a later compaction may keep them.
				rb.tr = &sourceLines{first: map[string]int{}}
				tr.repl = &replSource{line: n, first: rb.tr.first}
			}
			for k := range c.Replacement {
				rb.line = k + 1
				it := &c.Replacement[k]
				if err := rb.item(it, id+"-r"+strconv.Itoa(k)); err != nil {
					return fmt.Errorf("compacted: replacement_history[%d]: %w", k, err)
				}
				if c.Message != "" && it.Type == "message" && it.Role == "user" && len(rb.msgs) > 0 &&
					textOf(oaParts(it.Content, map[string]int{}, false), abi.BlockText) == c.Message {
					rb.msgs[len(rb.msgs)-1].Summary = true
				}
			}
			repl, _ := normalize(rb.msgs, nil, id+"-r", map[string]int{})
			s.AgentCompactions = append(s.AgentCompactions, AgentCompaction{ID: id, Summary: c.Message, FirstKept: len(b.msgs), Replacement: repl,
				Line: n, Bytes: len(line) + 1, Ours: c.Appended != nil, AppendedTo: c.Appended, whole: c.Replacement != nil})
			lastCompacted = n
		case "event_msg":
			var ev struct {
				Type string `json:"type"`
			}
			if err := decodeChecked(l.Payload, &ev); err != nil {
				return fmt.Errorf("event_msg: %s", jsonReason(err))
			}
			if ev.Type != "token_count" {
				if k := len(s.AgentCompactions) - 1; ev.Type == "context_compacted" && k >= 0 && lastCompacted == n-1 {
					s.AgentCompactions[k].Bytes += len(line) + 1 // the event Codex writes after the record is one with it
				}
				s.Skipped["event_msg/"+ev.Type]++
				return nil
			}
			var tc codexTokenCount
			if err := decodeChecked(l.Payload, &tc); err != nil {
				return fmt.Errorf("token_count: %s", jsonReason(err))
			}
			bill.codexTokens(l.Timestamp, &tc, n)
			// A token_count ends a model response.
			b.assistant = -1
			if tc.Info == nil || tc.Info.Last == nil || b.usage < 0 {
				s.Skipped["event_msg/token_count (unattributed)"]++
				return nil
			}
			u := tc.Info.Last
			cached := min(u.CachedInputTokens, u.InputTokens)
			b.msgs[b.usage].Usage = &abi.Usage{InputTokens: u.InputTokens - cached, CacheReadTokens: cached, OutputTokens: u.OutputTokens}
			b.usage = -1
		case "turn_context":
			bill.codexTurn(l.Payload, n)
			s.Skipped[l.Type]++
		case "":
			return errors.New(`expected a record with a "type"`)
		default:
			s.Skipped[l.Type]++
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrTornLine) {
		return err
	}
	finish(s, b.msgs, Codex)
	pinLeadingSystem(s.Messages)
	return err
}
