package abi

import (
	"strings"
	"testing"
)

func text(role string, texts ...string) Message {
	m := Message{Role: role}
	for _, t := range texts {
		m.Content = append(m.Content, Block{Type: BlockText, Text: t})
	}
	return m
}

func TestRequestText(t *testing.T) {
	for _, c := range []struct {
		name string
		m    Message
		want string // "" when m is no request
	}{
		{"plain", text(RoleUser, "  fix the login bug \n"), "fix the login bug"},
		{"reminder inside", text(RoleUser, "<system-reminder>be brief</system-reminder>fix it"), "fix it"},
		{"Copilot's timestamp and reminder", text(RoleUser,
			"<current_datetime>2026-06-24T14:43:40</current_datetime>\n\nmerge it\n\n<system_reminder>\n<sql_tables>x"), "merge it"},
		{"blocks joined", text(RoleUser, "first", "<environment_context>cwd</environment_context>", "second"), "first\n\nsecond"},
		{"task notification", text(RoleUser, "<task-notification>\n<status>completed</status>"), ""},
		{"skill body", text(RoleUser, "Base directory for this skill: /s\n\n# Review"), ""},
		{"command echo", text(RoleUser, "<command-name>/clear</command-name>"), ""},
		{"interruption", text(RoleUser, "[Request interrupted by user]"), ""},
		{"agent's summary", text(RoleUser, "This session is being continued from a previous conversation that ran out"), ""},
		{"only a reminder", text(RoleUser, "<system-reminder>x</system-reminder>"), ""},
		{"assistant", text(RoleAssistant, "fix it"), ""},
		{"host summary", Message{Role: RoleUser, Summary: true, Content: []Block{{Type: BlockText, Text: "fix it"}}}, ""},
		{"tool result", Message{Role: RoleUser, Content: []Block{
			{Type: BlockToolResult, ToolUseID: "t1", Text: "ok"}, {Type: BlockText, Text: "fix it"}}}, ""},
		{"image and text", Message{Role: RoleUser, Content: []Block{
			{Type: BlockImage, MediaType: "image/png", Data: []byte{1}}, {Type: BlockText, Text: "what is this"}}}, "what is this"},
	} {
		got, ok := RequestText(c.m)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s: RequestText = %q, %v; want %q", c.name, got, ok, c.want)
		}
	}
}

func TestIsObservation(t *testing.T) {
	act := text(RoleAssistant, "ls")
	for _, c := range []struct {
		name string
		prev *Message
		m    Message
		want bool
	}{
		{"SWE-agent output", &act, text(RoleUser, "a.py\n(Open file: a.py)\n(Current directory: /repo)"), true},
		{"mini-swe-agent output", &act, text(RoleUser, "<returncode>0</returncode>\n<output>a.py</output>"), true},
		{"format reminder", &act, text(RoleUser, "Please always provide EXACTLY ONE action in triple backticks"), true},
		{"output split over blocks", &act, text(RoleUser, "a.py\n(Open file: a.py)", "(Current directory: /repo)"), true},
		{"a request after a reply", &act, text(RoleUser, "now fix the test"), false},
		{"unknown predecessor: output", nil, text(RoleUser, "<returncode>0</returncode>"), true},
		{"unknown predecessor: a request", nil, text(RoleUser, "fix the test"), false},
		{"assistant", &act, text(RoleAssistant, "<returncode>0</returncode>"), false},
		{"after a user message", ptr(text(RoleUser, "x")), text(RoleUser, "<returncode>0</returncode>"), false},
	} {
		if got := IsObservation(c.prev, &c.m); got != c.want {
			t.Errorf("%s: IsObservation = %v, want %v", c.name, got, c.want)
		}
	}
}

func ptr(m Message) *Message { return &m }

func TestMessageText(t *testing.T) {
	m := Message{Role: RoleUser, Content: []Block{
		{Type: BlockText, Text: "a"}, {Type: BlockToolResult, Text: "not text"}, {Type: BlockText, Text: "b"}}}
	if got := m.Text(); got != "a\nb" {
		t.Errorf("Text = %q, want %q", got, "a\nb")
	}
	one := text(RoleUser, "only")
	if got := one.Text(); got != "only" {
		t.Errorf("Text = %q, want %q", got, "only")
	}
	if got := (&Message{}).Text(); got != "" {
		t.Errorf("Text of no blocks = %q", got)
	}
}

// removeOneByOne is the form withoutElement replaces: remove the first
// element, search again from the start.
func removeOneByOne(s, tag string) string {
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

func TestWithoutElement(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"keep", "keep"},
		{"a<r>x</r>b<r>y</r>c", "abc"},
		{"a<r>open to the end", "a"},
		{"a</r>b", "a</r>b"},
		// A removal joins "<" and "r>" into a new opening tag.
		{"<<r>x</r>r>y</r>z", "z"},
		{"<r<r></r>>q</r>tail", "tail"},
	} {
		if got := withoutElement(c.in, "r"); got != c.want {
			t.Errorf("withoutElement(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := removeOneByOne(c.in, "r"); got != c.want {
			t.Errorf("reference on %q = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzWithoutElement(f *testing.F) {
	for _, s := range []string{"", "<r>", "a<r>b</r>c", "<<r>x</r>r>y</r>z", "<r<r></r>>q</r>", "</r><r></r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := withoutElement(s, "r"), removeOneByOne(s, "r"); got != want {
			t.Fatalf("withoutElement(%q) = %q, removing one by one gives %q", s, got, want)
		}
	})
}

// A message made of thousands of reminders is read in linear time:
// removing them one by one, each removal copying the message, took 2.7 s.
func BenchmarkRequestTextManyReminders(b *testing.B) {
	m := text(RoleUser, strings.Repeat("<system-reminder></system-reminder>x", 30000))
	for b.Loop() {
		if got, _ := RequestText(m); len(got) != 30000 {
			b.Fatalf("got %d bytes", len(got))
		}
	}
}
