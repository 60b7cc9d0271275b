// Package msgcheck checks a conversation against the rules providers
// enforce on a request. The importers (host/formats) and the engine (host)
// both validate with it, so "valid" means one thing everywhere.
package msgcheck

import (
	"fmt"

	"github.com/compact-host/compact-host/abi"
)

// Error reports the first message that breaks a rule.
type Error struct {
	// Index is the position of the offending message; ID its ID.
	Index int
	ID    string
	// Reason says which rule it breaks.
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("message %d (%s): %s", e.Index, e.ID, e.Reason)
}

// Options relax or add rules.
type Options struct {
	// PendingTail allows the calls of a final assistant message to wait
	// for results: the agent is running them.
	PendingTail bool
	// UserFirst requires the first message that is not a system message
	// to be from the user, as Anthropic does.
	UserFirst bool
}

// Check returns nil or an *Error for the first broken rule:
//
//   - roles are system, user or assistant; every message has content;
//   - message IDs are non-empty and unique;
//   - block types are known; tool_use blocks appear only in assistant
//     messages, with an ID unique in the conversation and a name;
//     tool_result blocks appear only in user messages, before any other
//     block of their message;
//   - every tool_use has exactly one tool_result, in the user message right
//     after the assistant message holding the call or, for parallel calls,
//     in the run of user messages that follows it; no assistant or system
//     message comes between a call and its result;
//   - no tool_result is orphaned or duplicated.
func Check(msgs []abi.Message, opt Options) error {
	ids := make(map[string]bool, len(msgs))
	calls := make(map[string]bool)
	open := map[string]bool{} // calls of the last assistant message awaiting results
	var openFrom int          // index of that assistant message
	justOpened := false       // the previous message made calls
	firstSeen := false
	fail := func(i int, format string, args ...any) error {
		return &Error{Index: i, ID: msgs[i].ID, Reason: fmt.Sprintf(format, args...)}
	}
	for i, m := range msgs {
		switch m.Role {
		case abi.RoleSystem, abi.RoleUser, abi.RoleAssistant:
		default:
			return fail(i, "unknown role %q", m.Role)
		}
		if opt.UserFirst && !firstSeen && m.Role != abi.RoleSystem {
			firstSeen = true
			if m.Role != abi.RoleUser {
				return fail(i, "the first non-system message is from the %s; providers require the user", m.Role)
			}
		}
		if m.ID == "" {
			return fail(i, "empty ID")
		}
		if ids[m.ID] {
			return fail(i, "duplicate ID")
		}
		ids[m.ID] = true
		if len(m.Content) == 0 {
			return fail(i, "no content")
		}
		if len(open) > 0 && m.Role != abi.RoleUser {
			return fail(openFrom, "tool_use %s has no tool_result before the next %s message", anyKey(open), m.Role)
		}
		if justOpened && m.Content[0].Type != abi.BlockToolResult {
			return fail(i, "the message after tool calls does not start with their results")
		}
		justOpened = false
		seenOther := false
		for _, b := range m.Content {
			switch b.Type {
			case abi.BlockText, abi.BlockThinking, abi.BlockImage:
				seenOther = true
			case abi.BlockToolUse:
				if m.Role != abi.RoleAssistant {
					return fail(i, "tool_use in a %s message", m.Role)
				}
				if b.ID == "" || b.Name == "" {
					return fail(i, "tool_use without ID or name")
				}
				if calls[b.ID] {
					return fail(i, "duplicate tool_use ID %s", b.ID)
				}
				calls[b.ID] = true
				open[b.ID] = true
				openFrom = i
				justOpened = true
			case abi.BlockToolResult:
				if m.Role != abi.RoleUser {
					return fail(i, "tool_result in a %s message", m.Role)
				}
				if seenOther {
					return fail(i, "tool_result %s after other content", b.ToolUseID)
				}
				if !open[b.ToolUseID] {
					if calls[b.ToolUseID] {
						return fail(i, "tool_result %s is a duplicate or comes too late", b.ToolUseID)
					}
					return fail(i, "tool_result %s has no tool_use", b.ToolUseID)
				}
				delete(open, b.ToolUseID)
			default:
				return fail(i, "unknown block type %q", b.Type)
			}
		}
	}
	if len(open) > 0 && !(opt.PendingTail && openFrom == len(msgs)-1) {
		return fail(openFrom, "tool_use %s has no tool_result", anyKey(open))
	}
	return nil
}

// anyKey returns the smallest key of m, for a deterministic message.
func anyKey(m map[string]bool) string {
	first := ""
	for k := range m {
		if first == "" || k < first {
			first = k
		}
	}
	return first
}
