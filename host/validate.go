package host

import (
	"fmt"

	"github.com/compact-host/compact-host/abi"
)

// ValidationError says which message breaks the providers' rules and how.
type ValidationError struct {
	Index  int
	ID     string
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("message %d (%s): %s", e.Index, e.ID, e.Reason)
}

// Validate checks msgs against the rules providers enforce on a request:
// the first message that is not a system message is from the user; every
// tool_result answers a tool_use of the assistant message just before it
// (results of parallel calls may span several user messages, but no
// assistant message comes between a call and its result); every tool_use
// is answered exactly once before the next assistant message; tool_use IDs
// are unique. With pendingTail, calls of a final assistant message may
// still wait for results (the agent is running them).
func Validate(msgs []Message, pendingTail bool) error {
	seen := map[string]bool{}
	open := map[string]bool{}
	var openFrom int
	first := true
	for i := range msgs {
		m := &msgs[i]
		fail := func(format string, args ...any) error {
			return &ValidationError{Index: i, ID: m.ID, Reason: fmt.Sprintf(format, args...)}
		}
		if m.Role != abi.RoleSystem && first {
			first = false
			if m.Role != abi.RoleUser {
				return fail("the first non-system message is from %q, providers require the user", m.Role)
			}
		}
		switch m.Role {
		case abi.RoleAssistant:
			if len(open) > 0 {
				return fail("assistant message comes before the results of tool calls in message %d", openFrom)
			}
			for _, b := range m.Content {
				switch b.Type {
				case abi.BlockToolResult:
					return fail("tool_result in an assistant message")
				case abi.BlockToolUse:
					if b.ID == "" {
						return fail("tool_use without an id")
					}
					if seen[b.ID] {
						return fail("tool_use id %q is used twice", b.ID)
					}
					seen[b.ID] = true
					open[b.ID] = true
					openFrom = i
				}
			}
		case abi.RoleUser, abi.RoleSystem:
			for _, b := range m.Content {
				switch b.Type {
				case abi.BlockToolUse:
					return fail("tool_use in a %s message", m.Role)
				case abi.BlockToolResult:
					if !open[b.ToolUseID] {
						return fail("tool_result for %q has no tool_use in the assistant message before it", b.ToolUseID)
					}
					delete(open, b.ToolUseID)
				}
			}
			if len(open) > 0 && m.Role == abi.RoleUser && hasText(m) && !hasResult(m) {
				return fail("user text comes before the results of tool calls in message %d", openFrom)
			}
		default:
			return fail("unknown role %q", m.Role)
		}
	}
	if len(open) > 0 && !pendingTail {
		for id := range open {
			return &ValidationError{Index: openFrom, ID: msgs[openFrom].ID, Reason: fmt.Sprintf("tool_use %q has no tool_result", id)}
		}
	}
	return nil
}

func hasText(m *Message) bool {
	for _, b := range m.Content {
		if b.Type == abi.BlockText {
			return true
		}
	}
	return false
}

func hasResult(m *Message) bool {
	for _, b := range m.Content {
		if b.Type == abi.BlockToolResult {
			return true
		}
	}
	return false
}
