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
// open runs to the end of s. tag is a name: it holds no '<' or '/'.
//
// It gives what removing the first element and searching again from the
// start gives, where a removal can join the text on its two sides into a
// new opening tag, but in one pass: removing elements one by one copied
// the whole string each time, 2.7 s for a 1 MB message of 30,000
// reminders against 3.1 ms (one benchmark run of each). out, the text
// kept so far, holds no opening tag of its own, so the next one either
// crosses its end or lies wholly in rest.
func withoutElement(s, tag string) string {
	open, closing := "<"+tag+">", "</"+tag+">"
	i := strings.Index(s, open)
	if i < 0 {
		return s
	}
	out := append(make([]byte, 0, len(s)), s[:i]...)
	rest := s[i:]
	for {
		// The opening tag starts at out[k:], inOut of its bytes in out.
		k, inOut := -1, 0
		for c := max(0, len(out)-len(open)+1); c < len(out); c++ {
			n := len(out) - c
			if string(out[c:]) == open[:n] && strings.HasPrefix(rest, open[n:]) {
				k, inOut = c, n
				break
			}
		}
		if k < 0 {
			j := strings.Index(rest, open)
			if j < 0 {
				return string(append(out, rest...))
			}
			out = append(out, rest[:j]...)
			rest = rest[j:]
			k = len(out)
		}
		// No closing tag starts inside the opening one (tag is a name),
		// so it is looked for after it.
		after := len(open) - inOut
		e := strings.Index(rest[after:], closing)
		if e < 0 {
			return string(out[:k])
		}
		out, rest = out[:k], rest[after+e+len(closing):]
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
