package digest

import (
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// Harness text that agents inject as user messages: context, command
// echoes, notifications. None of it is something the user asked for.
var metaPrefixes = []string{
	"<environment_context>", "<user_instructions>", "<INSTRUCTIONS>", "# AGENTS.md instructions",
	"<turn_aborted>", "<task-notification>", "<command-message>", "<command-name>",
	"<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>",
	"<user-prompt-submit-hook>", "Caveat: The messages below were generated",
	"[Request interrupted by user", "Base directory for this skill:",
}

// Openings of a summary that an agent wrote to stand for earlier history.
var summaryPrefixes = []string{
	"This session is being continued from a previous conversation",
}

// RequestText returns what the user asked in m, or false when m is not a
// user request: not a user message, a tool result, a summary, or text the
// agent's harness injected (environment context, reminders, command echoes).
// System reminders and timestamps inside a request are removed. Requests
// and LatestRequest also leave out command output sent as user text.
func RequestText(m abi.Message) (string, bool) {
	if m.Role != abi.RoleUser || m.Summary {
		return "", false
	}
	var parts []string
	for _, b := range m.Content {
		switch b.Type {
		case abi.BlockToolResult:
			return "", false
		case abi.BlockText:
			t := strings.TrimSpace(stripTags(b.Text, "system-reminder", "system_reminder", "current_datetime"))
			if t == "" || isMeta(t) {
				continue
			}
			parts = append(parts, t)
		}
	}
	if len(parts) == 0 {
		return "", false
	}
	return strings.Join(parts, "\n\n"), true
}

// IsSummaryText reports whether text reads as a summary of earlier history
// written by an agent (for example Claude Code's continuation message).
func IsSummaryText(text string) bool {
	t := strings.TrimSpace(text)
	for _, p := range summaryPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func isMeta(t string) bool {
	for _, p := range metaPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return IsSummaryText(t)
}

// isObservation reports whether msgs[i] is command output or a format
// reminder sent back as user text after an assistant message: SWE-agent's
// output ends with the state lines "(Open file: …)" and "(Current
// directory: …)"; mini-swe-agent's opens with "<returncode>", and it
// answers a reply without exactly one action with a reminder.
func isObservation(msgs []abi.Message, i int) bool {
	if i == 0 || i >= len(msgs) || msgs[i].Role != abi.RoleUser || msgs[i-1].Role != abi.RoleAssistant {
		return false
	}
	t := strings.TrimSpace(textOf(msgs[i]))
	switch {
	case strings.Contains(t, "(Current directory: ") && strings.Contains(t, "(Open file: "):
		return true
	case strings.HasPrefix(t, "<returncode>"), strings.HasPrefix(t, "<output>"):
		return true
	}
	return strings.Contains(t, "EXACTLY ONE action") || strings.Contains(t, "exactly one bash code block")
}

// stripTag removes every <tag>…</tag> element from s.
func stripTag(s, tag string) string {
	open, closing := "<"+tag+">", "</"+tag+">"
	for {
		i := strings.Index(s, open)
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], closing)
		if j < 0 {
			return s[:i]
		}
		s = s[:i] + s[i+j+len(closing):]
	}
}

// Request is one user request of a conversation.
type Request struct {
	// Index is the position of the message in the folded messages.
	Index int
	Text  string
}

// Requests lists the user requests of msgs in order.
func Requests(msgs []abi.Message) []Request {
	var out []Request
	for i, m := range msgs {
		if t, ok := RequestText(m); ok && !isObservation(msgs, i) {
			out = append(out, Request{Index: i, Text: t})
		}
	}
	return out
}

// LatestRequest returns the last user request of msgs.
func LatestRequest(msgs []abi.Message) (Request, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if t, ok := RequestText(msgs[i]); ok && !isObservation(msgs, i) {
			return Request{Index: i, Text: t}, true
		}
	}
	return Request{}, false
}

func stripTags(s string, tags ...string) string {
	for _, t := range tags {
		s = stripTag(s, t)
	}
	return s
}
