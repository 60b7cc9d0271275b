package formats

import (
	"strconv"

	"github.com/compact-host/compact-host/abi"
)

// Repair kinds counted in Session.Repaired.
const (
	// RepairMissingResult counts tool calls with no recorded result, given
	// a synthesized is_error tool_result.
	RepairMissingResult = "missing_result"
	// RepairOrphanResult counts tool results with no matching call (or a
	// second result for one call), kept as text.
	RepairOrphanResult = "orphan_result"
	// RepairDuplicateCallID counts tool calls whose ID was empty or used
	// before, given a fresh one.
	RepairDuplicateCallID = "duplicate_call_id"
	// RepairMisplacedBlock counts tool_use blocks outside assistant
	// messages or tool_result blocks outside user messages, kept as text.
	RepairMisplacedBlock = "misplaced_block"
	// RepairDuplicateMessageID counts messages whose ID was empty or used
	// before, given a fresh one.
	RepairDuplicateMessageID = "duplicate_message_id"
)

// MissingResultText is the content of a tool_result synthesized for a call
// whose result the source never recorded (an interrupted call).
const MissingResultText = "[tool result not recorded: the call was interrupted or its output was lost]"

type resultRef struct{ msg, block int }

// normalize makes msgs satisfy Validate, changing as little as it can: a
// valid input is returned unchanged. Tool results are gathered into the user
// message right after their call's assistant message (the next user message
// absorbs them, or a new one is made); missing results are synthesized;
// orphans become text; IDs are made unique; empty messages are dropped.
// marks are indexes into msgs; the returned marks are the matching indexes
// into the result (a mark at a dropped message moves to the next one kept).
// idPrefix names messages that have no ID.
func normalize(msgs []abi.Message, marks []int, idPrefix string, repaired map[string]int) ([]abi.Message, []int) {
	fixIDs(msgs, idPrefix, repaired)
	if Validate(msgs) == nil {
		return msgs, marks
	}
	// Copy content so the caller's slices are not changed.
	in := make([]abi.Message, len(msgs))
	for i, m := range msgs {
		m.Content = append([]abi.Block(nil), m.Content...)
		in[i] = m
	}
	// Blocks in the wrong role become text; call IDs become unique.
	callIDs := make(map[string]bool)
	origID := make(map[[2]int]string) // (msg, block) of a call -> ID in the source
	for i := range in {
		m := &in[i]
		for j := range m.Content {
			b := &m.Content[j]
			switch {
			case b.Type == abi.BlockToolUse && m.Role != abi.RoleAssistant,
				b.Type == abi.BlockToolResult && m.Role != abi.RoleUser:
				*b = abi.Block{Type: abi.BlockText, Text: blockAsText(*b)}
				repaired[RepairMisplacedBlock]++
			case b.Type == abi.BlockToolUse:
				origID[[2]int{i, j}] = b.ID
				if b.ID == "" || callIDs[b.ID] {
					base := b.ID
					if base == "" {
						base = in[i].ID + "-call"
					}
					b.ID = uniqueName(base, callIDs)
					repaired[RepairDuplicateCallID]++
				}
				if b.Name == "" {
					b.Name = "unknown"
				}
				callIDs[b.ID] = true
			}
		}
	}
	// Index results by the call ID they name.
	results := make(map[string][]resultRef)
	for i, m := range in {
		if m.Role != abi.RoleUser {
			continue
		}
		for j, b := range m.Content {
			if b.Type == abi.BlockToolResult {
				results[b.ToolUseID] = append(results[b.ToolUseID], resultRef{i, j})
			}
		}
	}
	used := make(map[resultRef]bool)
	out := make([]abi.Message, 0, len(in)+4)
	newMarks := make([]int, len(marks))
	var absorb []abi.Block // results waiting for the next user message
	for i := 0; i <= len(in); i++ {
		for k, mk := range marks {
			if mk == i {
				newMarks[k] = len(out)
			}
		}
		if i == len(in) {
			break
		}
		m := in[i]
		switch m.Role {
		case abi.RoleAssistant:
			var res []abi.Block
			for j, b := range m.Content {
				if b.Type != abi.BlockToolUse {
					continue
				}
				orig := origID[[2]int{i, j}]
				found := false
				for _, ref := range results[orig] {
					if ref.msg > i && !used[ref] {
						used[ref] = true
						r := in[ref.msg].Content[ref.block]
						r.ToolUseID = b.ID
						res = append(res, r)
						found = true
						break
					}
				}
				if !found {
					res = append(res, abi.Block{Type: abi.BlockToolResult, ToolUseID: b.ID, Text: MissingResultText, IsError: true})
					repaired[RepairMissingResult]++
				}
			}
			if len(m.Content) > 0 {
				out = append(out, m)
			}
			if len(res) > 0 {
				if i+1 < len(in) && in[i+1].Role == abi.RoleUser && !marked(marks, i+1) {
					absorb = res
				} else {
					out = append(out, abi.Message{ID: m.ID + "-results", Role: abi.RoleUser, Content: res})
				}
			}
		case abi.RoleUser:
			content := absorb
			absorb = nil
			var rest []abi.Block
			for j, b := range m.Content {
				if b.Type != abi.BlockToolResult {
					rest = append(rest, b)
					continue
				}
				if used[resultRef{i, j}] {
					continue
				}
				rest = append(rest, abi.Block{Type: abi.BlockText, Text: blockAsText(b)})
				repaired[RepairOrphanResult]++
			}
			m.Content = append(content, rest...)
			if len(m.Content) > 0 {
				out = append(out, m)
			}
		default:
			if len(m.Content) > 0 {
				out = append(out, m)
			}
		}
	}
	fixIDs(out, idPrefix, repaired)
	return out, newMarks
}

// marked reports whether a mark falls on index i: results are not moved
// across a compaction.
func marked(marks []int, i int) bool {
	for _, m := range marks {
		if m == i {
			return true
		}
	}
	return false
}

// fixIDs gives every message a non-empty ID unique in msgs.
func fixIDs(msgs []abi.Message, idPrefix string, repaired map[string]int) {
	seen := make(map[string]bool, len(msgs))
	for i := range msgs {
		id := msgs[i].ID
		if id == "" {
			id = uniqueName(idPrefix+"-"+strconv.Itoa(i), seen)
			repaired[RepairDuplicateMessageID]++
		} else if seen[id] {
			id = uniqueName(id, seen)
			repaired[RepairDuplicateMessageID]++
		}
		msgs[i].ID = id
		seen[id] = true
	}
}

// uniqueName returns base, or base~2, base~3, ... whichever is not in seen.
func uniqueName(base string, seen map[string]bool) string {
	if !seen[base] {
		return base
	}
	for n := 2; ; n++ {
		s := base + "~" + strconv.Itoa(n)
		if !seen[s] {
			return s
		}
	}
}

// blockAsText renders a tool block that cannot stay a tool block.
func blockAsText(b abi.Block) string {
	switch b.Type {
	case abi.BlockToolUse:
		return "[tool call " + b.Name + " " + b.ID + "] " + string(b.Input)
	case abi.BlockToolResult:
		return "[tool result for " + b.ToolUseID + "] " + b.Text
	}
	return b.Text
}

// pinLeadingSystem pins the system messages that open the conversation:
// they are the agent's system prompt.
func pinLeadingSystem(msgs []abi.Message) {
	for i := range msgs {
		if msgs[i].Role != abi.RoleSystem {
			return
		}
		msgs[i].Pinned = true
	}
}
