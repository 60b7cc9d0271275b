package formats

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, Write(&buf, format, msgs), "Write %s", format)
	f, err := Detect(buf.Bytes())
	assert.NoError(t, err, "Detect(written %s)", format)
	// A request of text alone, with no system, could be either chat
	// format; Read takes it as the one named.
	if !compatible(format, f) {
		assert.Equal(t, format, f, "Detect(written %s)", format)
	}
	s, err := Read(bytes.NewReader(buf.Bytes()), format)
	require.NoError(t, err, "Read back %s", format)
	assert.NoError(t, Validate(s.Messages), "read back %s", format)
	assert.Empty(t, s.Repaired, "read back %s needed repairs", format)
	return s
}

func TestRoundTripCanonical(t *testing.T) {
	msgs := conversation()
	s := roundTrip(t, Canonical, msgs)
	assert.Equal(t, msgs, s.Messages, "canonical round trip changed the messages")
}

func TestRoundTripAnthropic(t *testing.T) {
	msgs := conversation()
	got := roundTrip(t, Anthropic, msgs).Messages
	assert.Equal(t, projectAnthropic(msgs), stripIDs(got), "anthropic round trip differs beyond what the format cannot hold")
}

func TestRoundTripOpenAI(t *testing.T) {
	msgs := conversation()
	got := roundTrip(t, OpenAI, msgs).Messages
	assert.Equal(t, projectOpenAI(msgs), stripIDs(got), "openai round trip differs beyond what the format cannot hold")
}

// TestRoundTripCorpus writes every corpus session in each writable format
// and reads it back.
func TestRoundTripCorpus(t *testing.T) {
	for _, c := range append(corpus, corpusNew...) {
		t.Run(c.file, func(t *testing.T) {
			s, err := ReadFile(c.path(t))
			require.NoError(t, err)
			got := roundTrip(t, Canonical, s.Messages).Messages
			assert.True(t, assert.ObjectsAreEqual(s.Messages, got), "canonical round trip changed the messages")
			got = stripIDs(roundTrip(t, Anthropic, s.Messages).Messages)
			if want := projectAnthropic(s.Messages); !assert.True(t, assert.ObjectsAreEqual(want, got), "anthropic round trip") {
				diffLines(t, describeAll(got), describeAll(want))
			}
			got = stripIDs(roundTrip(t, OpenAI, s.Messages).Messages)
			if want := projectOpenAI(s.Messages); !assert.True(t, assert.ObjectsAreEqual(want, got), "openai round trip") {
				diffLines(t, describeAll(got), describeAll(want))
			}
		})
	}
}

func TestWriteShapes(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, Anthropic, conversation()))
	var a struct {
		System   any `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &a))
	assert.Equal(t, "Be brief.", a.System)
	require.Len(t, a.Messages, 7)
	assert.Equal(t, "image", a.Messages[0].Content[1]["type"])
	assert.Equal(t, true, a.Messages[1].Content[2]["input"].(map[string]any)["all"])
	assert.Contains(t, buf.String(), "<b>&</b>", "HTML characters were escaped")

	buf.Reset()
	require.NoError(t, Write(&buf, OpenAI, conversation()))
	var o struct {
		Messages []map[string]any `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &o))
	roles := []string{}
	for _, m := range o.Messages {
		roles = append(roles, m["role"].(string))
	}
	assert.Equal(t, "system,user,assistant,tool,tool,assistant,tool,user,assistant", strings.Join(roles, ","), "openai roles")
	call := o.Messages[2]["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	assert.Equal(t, `{"path":"/tmp","all":true}`, call["arguments"])
	assert.Equal(t, "List, then size.", o.Messages[2]["reasoning_content"])
	url := o.Messages[1]["content"].([]any)[1].(map[string]any)["image_url"].(map[string]any)["url"]
	assert.Equal(t, "data:image/png;base64,iVBORwABAg==", url)
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
