package eval

import (
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
)

// Recall is how many of the files a folded part touched a context still
// names.
type Recall struct {
	Modified      int `json:"modified"`
	ModifiedNamed int `json:"modified_named"`
	Read          int `json:"read"`
	ReadNamed     int `json:"read_named"`
	// ModifiedByName and ReadByName count the files named by their path
	// or, more leniently, by their file name alone (a summary that writes
	// paths relative to the project).
	ModifiedByName int `json:"modified_by_name"`
	ReadByName     int `json:"read_by_name"`
	// MissingModified and MissingRead list the files not named, at most
	// maxMissing each.
	MissingModified []string `json:"missing_modified,omitempty"`
	MissingRead     []string `json:"missing_read,omitempty"`
}

const maxMissing = 20

// add accumulates r into the pooled recall p.
func (p *Recall) add(r Recall) {
	p.Modified += r.Modified
	p.ModifiedNamed += r.ModifiedNamed
	p.Read += r.Read
	p.ReadNamed += r.ReadNamed
	p.ModifiedByName += r.ModifiedByName
	p.ReadByName += r.ReadByName
	for _, f := range r.MissingModified {
		if len(p.MissingModified) < maxMissing {
			p.MissingModified = append(p.MissingModified, f)
		}
	}
	for _, f := range r.MissingRead {
		if len(p.MissingRead) < maxMissing {
			p.MissingRead = append(p.MissingRead, f)
		}
	}
}

// ModifiedShare is the share of modified files named, 1 when there were none.
func (r Recall) ModifiedShare() float64 { return share(r.ModifiedNamed, r.Modified) }

// ReadShare is the share of read files named, 1 when there were none.
func (r Recall) ReadShare() float64 { return share(r.ReadNamed, r.Read) }

func share(n, of int) float64 {
	if of == 0 {
		return 1
	}
	return float64(n) / float64(of)
}

// ArtifactRecall measures which of the files in ops the text names: a file
// is named when its path occurs in the text as written. The ByName counts
// also accept the file name alone.
func ArtifactRecall(ops abi.FileOps, text string) Recall {
	r := Recall{Modified: len(ops.Modified), Read: len(ops.Read)}
	for _, f := range ops.Modified {
		switch {
		case strings.Contains(text, f):
			r.ModifiedNamed++
			r.ModifiedByName++
		case strings.Contains(text, baseName(f)):
			r.ModifiedByName++
			fallthrough
		default:
			if len(r.MissingModified) < maxMissing {
				r.MissingModified = append(r.MissingModified, f)
			}
		}
	}
	for _, f := range ops.Read {
		switch {
		case strings.Contains(text, f):
			r.ReadNamed++
			r.ReadByName++
		case strings.Contains(text, baseName(f)):
			r.ReadByName++
			fallthrough
		default:
			if len(r.MissingRead) < maxMissing {
				r.MissingRead = append(r.MissingRead, f)
			}
		}
	}
	return r
}

// baseName is the last element of a slash- or backslash-separated path.
func baseName(path string) string {
	path = strings.TrimRight(path, `/\`)
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[i+1:]
	}
	return path
}

// ContextText is every piece of text in msgs a model would read: text and
// thinking, tool names and arguments, tool results.
func ContextText(msgs []abi.Message) string {
	var b strings.Builder
	for i := range msgs {
		for _, bl := range msgs[i].Content {
			if bl.Text != "" {
				b.WriteString(bl.Text)
				b.WriteByte('\n')
			}
			if bl.Name != "" {
				b.WriteString(bl.Name)
				b.WriteByte('\n')
			}
			if len(bl.Input) > 0 {
				b.Write(bl.Input)
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

// LatestRequest is the text of the latest user request in msgs: a user
// message with text of the user's own that is not a summary; ok is false
// when there is none. Sessions whose actions are text need latestRequest.
//
// Agents' harnesses send text as user messages that nobody asked for:
// Codex its AGENTS.md and environment context, Claude Code skill bodies
// and task notifications. Those are not requests, and the timestamps and
// reminders inside a request are not its words; a summary is judged on
// what the user wrote.
func LatestRequest(msgs []abi.Message) (text string, ok bool) { return latestRequest(msgs, false) }

// latestRequest is LatestRequest for a session read by textActions: in a
// trajectory whose actions are the assistant's text (SWE-agent, and
// mini-swe-agent before tool calls), the user message after an assistant
// message is that action's output, not a request. Counting it as one made
// a command's output the request, and a summary that quoted the output
// "kept" it while the task was lost.
func latestRequest(msgs []abi.Message, textActions bool) (text string, ok bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		if m.Role != abi.RoleUser || m.Summary {
			continue
		}
		if textActions && precededByAssistant(msgs, i) {
			continue
		}
		if t, ok := requestText(m); ok {
			return t, true
		}
	}
	return "", false
}

// harnessOpenings open the user messages that agents' harnesses write:
// Codex, Claude Code and Copilot CLI as the corpus shows them.
var harnessOpenings = []string{
	"# AGENTS.md instructions", "<environment_context>", "<user_instructions>", "<INSTRUCTIONS>", "<turn_aborted>",
	"<task-notification>", "<command-message>", "<command-name>", "<local-command-stdout>", "<local-command-stderr>",
	"<local-command-caveat>", "Caveat: The messages below were generated", "Base directory for this skill:",
	"[Request interrupted by user",
}

// harnessTags are elements harnesses put inside a user's request.
var harnessTags = []string{"current_datetime", "system-reminder", "system_reminder"}

// requestText is the user's own text in m, without the elements harnesses
// add; ok is false when nothing is left or m is harness text.
func requestText(m *abi.Message) (string, bool) {
	var parts []string
	for _, b := range m.Content {
		if b.Type != abi.BlockText {
			continue
		}
		t := b.Text
		for _, tag := range harnessTags {
			t = dropElement(t, tag)
		}
		t = strings.TrimSpace(t)
		if t == "" || harnessText(t) {
			continue
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "", false
	}
	return strings.Join(parts, "\n"), true
}

func harnessText(t string) bool {
	for _, p := range harnessOpenings {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// dropElement removes every <tag>…</tag> of s; an element left open runs
// to the end.
func dropElement(s, tag string) string {
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

// precededByAssistant reports whether an assistant message comes before
// msgs[i], user messages between them aside.
func precededByAssistant(msgs []abi.Message, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch msgs[j].Role {
		case abi.RoleAssistant:
			return true
		case abi.RoleSystem:
			return false
		}
	}
	return false
}

// textActions reports whether s is a trajectory whose actions are the
// assistant's text: a SWE-agent or mini-swe-agent file without a single
// tool call.
func textActions(s *formats.Session) bool {
	if s.Format != formats.SWEAgent && s.Format != formats.MiniSWEAgent {
		return false
	}
	for i := range s.Messages {
		for _, b := range s.Messages[i].Content {
			if b.Type == abi.BlockToolUse {
				return false
			}
		}
	}
	return true
}

// retentionPrefix is how much of a request, whitespace folded, must occur
// in the context for the request to count as retained: the opening words
// that identify it, as the engine's own check uses.
const retentionPrefix = 200

// Retained reports whether text carries request: the request's first
// retentionPrefix bytes (cut at a rune boundary), whitespace folded, occur
// in the whitespace-folded text. Quote marks at the start of lines are
// dropped on both sides, so a request quoted as a Markdown block counts.
func Retained(request, text string) bool {
	req := foldQuoted(request)
	if len(req) > retentionPrefix {
		n := retentionPrefix
		for n > 0 && !runeStart(req[n]) {
			n--
		}
		req = req[:n]
	}
	return req != "" && strings.Contains(foldQuoted(text), req)
}

// foldQuoted folds whitespace after dropping the "> " quote marks that
// open lines.
func foldQuoted(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, "> \t")
	}
	return foldSpace(strings.Join(lines, "\n"))
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }

func foldSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// Valid checks msgs as a request the agent is about to send: no orphaned
// tool result, no call without its result. It returns the engine's
// validation error.
func Valid(msgs []abi.Message) error { return host.Validate(msgs, false) }
