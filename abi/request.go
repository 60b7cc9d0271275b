package abi

import "strings"

// What the user asked is the task a summary must keep, and the host checks
// that it does (README.md, "What the host checks a summary keeps"). Host and plugins read a request the
// same way through these functions, so a summary that states the request
// is never judged to lack it, and the host never appends harness text in
// its place.

// harnessOpenings open the user messages that agents' harnesses write
// (context, command echoes, notifications, skill bodies): none of it is
// something the user asked for.
var harnessOpenings = []string{
	"<environment_context>", "<user_instructions>", "<INSTRUCTIONS>", "# AGENTS.md instructions",
	"<turn_aborted>", "<task-notification>", "<command-message>", "<command-name>",
	"<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>",
	"<user-prompt-submit-hook>", "Caveat: The messages below were generated",
	"[Request interrupted by user", "Base directory for this skill:",
}

// harnessElements are the elements harnesses put inside a user's request:
// reminders and timestamps.
var harnessElements = []string{"system-reminder", "system_reminder", "current_datetime"}

// summaryOpenings open a summary that an agent wrote to stand for earlier
// history.
var summaryOpenings = []string{
	"This session is being continued from a previous conversation",
}

// RequestText returns what the user asked in m, or false when m is not a
// user request: not a user message, a summary, a tool result, or text the
// agent's harness injected. The harness's reminders and timestamps inside a
// request are removed; text blocks are joined by a blank line.
func RequestText(m Message) (string, bool) {
	if m.Role != RoleUser || m.Summary {
		return "", false
	}
	var parts []string
	for _, b := range m.Content {
		switch b.Type {
		case BlockToolResult:
			return "", false
		case BlockText:
			t := b.Text
			for _, tag := range harnessElements {
				t = withoutElement(t, tag)
			}
			t = strings.TrimSpace(t)
			if t == "" || hasPrefix(t, harnessOpenings) || IsSummaryText(t) {
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
// written by an agent (Claude Code's continuation message, for one).
func IsSummaryText(text string) bool {
	return hasPrefix(strings.TrimSpace(text), summaryOpenings)
}

// IsObservation reports whether m, which follows prev, is command output
// or a format reminder sent back as user text after an assistant message,
// as agents whose actions are text do: SWE-agent's output ends with the
// state lines "(Open file: …)" and "(Current directory: …)";
// mini-swe-agent's opens with "<returncode>" or "<output>", and it answers
// a reply without exactly one action with a reminder. prev is nil when
// what came before m is not known, as for the first message of the
// messages a strategy folds: m is then judged by its text alone.
func IsObservation(prev, m *Message) bool {
	if prev != nil && prev.Role != RoleAssistant || m.Role != RoleUser {
		return false
	}
	t := strings.TrimSpace(m.Text())
	switch {
	case strings.Contains(t, "(Current directory: ") && strings.Contains(t, "(Open file: "):
		return true
	case strings.HasPrefix(t, "<returncode>"), strings.HasPrefix(t, "<output>"):
		return true
	}
	return strings.Contains(t, "EXACTLY ONE action") || strings.Contains(t, "exactly one bash code block")
}

// withoutElement removes every <tag>…</tag> element of s; an element left
// open runs to the end of s.
func withoutElement(s, tag string) string {
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

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
