package formats

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
)

// conversation uses every block type and message flag.
func conversation() []abi.Message {
	return []abi.Message{
		{ID: "s1", Role: abi.RoleSystem, Pinned: true, Content: []abi.Block{text("Be brief.")}},
		{ID: "u1", Role: abi.RoleUser, Content: []abi.Block{text("What is in /tmp? <b>&</b>"), {Type: abi.BlockImage, MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}}}},
		{ID: "a1", Role: abi.RoleAssistant, Usage: &abi.Usage{InputTokens: 10, OutputTokens: 5, CacheReadTokens: 100, CacheWriteTokens: 7},
			Content: []abi.Block{{Type: abi.BlockThinking, Text: "List, then size."}, text("Checking."), toolUse("c1", "ls", `{"path":"/tmp","all":true}`), toolUse("c2", "du", `{"path":"/tmp"}`)}},
		{ID: "r1", Role: abi.RoleUser, Content: []abi.Block{toolResult("c1", "a.txt\nb.txt"), toolResult("c2", "8K\t/tmp")}},
		{ID: "a2", Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockThinking, Text: "Read it."}, {Type: abi.BlockThinking, Text: "Carefully."}, toolUse("c3", "cat", `{"path":"/tmp/a.txt","lines":[1,2]}`)}},
		{ID: "r2", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "c3", Text: "permission denied", IsError: true}}},
		{ID: "sum", Role: abi.RoleUser, Summary: true, Pinned: true, Content: []abi.Block{text("Summary: listed /tmp.")}},
		{ID: "a3", Role: abi.RoleAssistant, Content: []abi.Block{text("Two files, 8K; a.txt is unreadable. ünïcödé ✓")}},
	}
}

func roundTrip(t *testing.T, format string, msgs []abi.Message) *Session {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, format, msgs); err != nil {
		t.Fatalf("Write %s: %v", format, err)
	}
	if f, err := Detect(buf.Bytes()); err != nil || f != format {
		t.Errorf("Detect(written %s) = %q, %v", format, f, err)
	}
	s, err := Read(bytes.NewReader(buf.Bytes()), format)
	if err != nil {
		t.Fatalf("Read back %s: %v", format, err)
	}
	if err := Validate(s.Messages); err != nil {
		t.Errorf("read back %s: %v", format, err)
	}
	if len(s.Repaired) != 0 {
		t.Errorf("read back %s needed repairs: %v", format, s.Repaired)
	}
	return s
}

func TestRoundTripCanonical(t *testing.T) {
	msgs := conversation()
	s := roundTrip(t, Canonical, msgs)
	if !reflect.DeepEqual(s.Messages, msgs) {
		diffLines(t, describeAll(s.Messages), describeAll(msgs))
		t.Error("canonical round trip changed the messages")
	}
}

func TestRoundTripAnthropic(t *testing.T) {
	msgs := conversation()
	got := roundTrip(t, Anthropic, msgs).Messages
	diffLines(t, describeAll(stripIDs(got)), describeAll(projectAnthropic(msgs)))
	if !reflect.DeepEqual(stripIDs(got), projectAnthropic(msgs)) {
		t.Error("anthropic round trip differs beyond what the format cannot hold")
	}
}

func TestRoundTripOpenAI(t *testing.T) {
	msgs := conversation()
	got := roundTrip(t, OpenAI, msgs).Messages
	diffLines(t, describeAll(stripIDs(got)), describeAll(projectOpenAI(msgs)))
	if !reflect.DeepEqual(stripIDs(got), projectOpenAI(msgs)) {
		t.Error("openai round trip differs beyond what the format cannot hold")
	}
}

// TestRoundTripCorpus writes every corpus session in each writable format
// and reads it back.
func TestRoundTripCorpus(t *testing.T) {
	for _, c := range corpus {
		t.Run(c.file, func(t *testing.T) {
			s, err := ReadFile(corpusPath(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := roundTrip(t, Canonical, s.Messages).Messages; !reflect.DeepEqual(got, s.Messages) {
				t.Error("canonical round trip changed the messages")
			}
			if got, want := stripIDs(roundTrip(t, Anthropic, s.Messages).Messages), projectAnthropic(s.Messages); !reflect.DeepEqual(got, want) {
				diffLines(t, describeAll(got), describeAll(want))
			}
			if got, want := stripIDs(roundTrip(t, OpenAI, s.Messages).Messages), projectOpenAI(s.Messages); !reflect.DeepEqual(got, want) {
				diffLines(t, describeAll(got), describeAll(want))
			}
		})
	}
}

func TestWriteShapes(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, Anthropic, conversation()); err != nil {
		t.Fatal(err)
	}
	var a struct {
		System   any `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(buf.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	if a.System != "Be brief." || len(a.Messages) != 7 || a.Messages[0].Content[1]["type"] != "image" ||
		a.Messages[1].Content[2]["input"].(map[string]any)["all"] != true {
		t.Errorf("anthropic request: %s", buf.String())
	}
	if !strings.Contains(buf.String(), "<b>&</b>") {
		t.Error("HTML characters were escaped")
	}

	buf.Reset()
	if err := Write(&buf, OpenAI, conversation()); err != nil {
		t.Fatal(err)
	}
	var o struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(buf.Bytes(), &o); err != nil {
		t.Fatal(err)
	}
	roles := []string{}
	for _, m := range o.Messages {
		roles = append(roles, m["role"].(string))
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool,tool,assistant,tool,user,assistant" {
		t.Errorf("openai roles: %v", roles)
	}
	call := o.Messages[2]["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	if call["arguments"] != `{"path":"/tmp","all":true}` || o.Messages[2]["reasoning_content"] != "List, then size." {
		t.Errorf("openai assistant message: %v", o.Messages[2])
	}
	if url := o.Messages[1]["content"].([]any)[1].(map[string]any)["image_url"].(map[string]any)["url"]; url != "data:image/png;base64,iVBORwABAg==" {
		t.Errorf("image URL %v", url)
	}
}

func stripIDs(msgs []abi.Message) []abi.Message {
	out := make([]abi.Message, len(msgs))
	for i, m := range msgs {
		m.ID = ""
		out[i] = m
	}
	return out
}

// plain drops what neither request format holds: IDs, usage, flags.
func plain(m abi.Message) abi.Message {
	return abi.Message{Role: m.Role, Content: append([]abi.Block(nil), m.Content...)}
}

// projectAnthropic is msgs as an Anthropic request can hold them.
func projectAnthropic(msgs []abi.Message) []abi.Message {
	var out []abi.Message
	i := 0
	sys := abi.Message{Role: abi.RoleSystem, Pinned: true}
	for ; i < len(msgs) && msgs[i].Role == abi.RoleSystem; i++ {
		for _, b := range msgs[i].Content {
			if b.Type == abi.BlockText {
				sys.Content = append(sys.Content, b)
			}
		}
	}
	if len(sys.Content) > 0 {
		out = append(out, sys)
	}
	startsWithResult := func(m abi.Message) bool {
		return m.Role == abi.RoleUser && len(m.Content) > 0 && m.Content[0].Type == abi.BlockToolResult
	}
	for _, m := range msgs[i:] {
		p := plain(m)
		if p.Role == abi.RoleSystem {
			p.Role = abi.RoleUser
		}
		// The results of parallel calls travel in one user message,
		// results first.
		if n := len(out); n > 0 && startsWithResult(out[n-1]) && startsWithResult(p) {
			var results, rest []abi.Block
			for _, b := range append(out[n-1].Content, p.Content...) {
				if b.Type == abi.BlockToolResult {
					results = append(results, b)
				} else {
					rest = append(rest, b)
				}
			}
			out[n-1].Content = append(results, rest...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// projectOpenAI is msgs as a Chat Completions request can hold them.
func projectOpenAI(msgs []abi.Message) []abi.Message {
	var out []abi.Message
	resultsOpen := false
	for i, m := range msgs {
		p := plain(m)
		p.Pinned = m.Role == abi.RoleSystem && (i == 0 || out[len(out)-1].Pinned)
		switch m.Role {
		case abi.RoleUser:
			var results, rest []abi.Block
			for _, b := range p.Content {
				if b.Type == abi.BlockToolResult {
					b.IsError = false
					results = append(results, b)
				} else {
					rest = append(rest, b)
				}
			}
			if len(results) > 0 {
				if resultsOpen {
					out[len(out)-1].Content = append(out[len(out)-1].Content, results...)
				} else {
					out = append(out, abi.Message{Role: abi.RoleUser, Content: results})
				}
				resultsOpen = true
			}
			if len(rest) > 0 {
				out = append(out, abi.Message{Role: abi.RoleUser, Content: rest})
				resultsOpen = false
			}
			continue
		case abi.RoleAssistant:
			var thinking []string
			var content, calls []abi.Block
			for _, b := range p.Content {
				switch b.Type {
				case abi.BlockThinking:
					thinking = append(thinking, b.Text)
				case abi.BlockToolUse:
					calls = append(calls, b)
				default:
					content = append(content, b)
				}
			}
			p.Content = nil
			if len(thinking) > 0 {
				p.Content = append(p.Content, abi.Block{Type: abi.BlockThinking, Text: strings.Join(thinking, "\n\n")})
			}
			p.Content = append(append(p.Content, content...), calls...)
		}
		resultsOpen = false
		out = append(out, p)
	}
	return out
}
