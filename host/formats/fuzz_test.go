package formats

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/compact-host/compact-host/abi"

	"github.com/stretchr/testify/require"
)

// seedCorpusHead adds the first lines of a corpus file, when present, as a
// seed.
func seedCorpusHead(f *testing.F, name string, lines int) {
	path, ok := findCorpus(name)
	if !ok {
		return
	}
	file, err := os.Open(path)
	if err != nil {
		return
	}
	defer file.Close()
	var buf bytes.Buffer
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for i := 0; i < lines && sc.Scan(); i++ {
		if line := sc.Bytes(); len(line) <= 2048 { // small seeds keep the fuzzer fast
			buf.Write(line)
			buf.WriteByte('\n')
		}
	}
	f.Add(buf.Bytes())
}

// fuzzRead checks that reading any input ends in a valid session or a parse
// error, never a panic or a hang, and that what was read survives a
// canonical round trip.
func fuzzRead(f *testing.F, format string, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add([]byte(""))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Read(bytes.NewReader(data), format)
		if err != nil && (format == "" && errors.Is(err, ErrUnknownFormat) || format != "" && errors.Is(err, ErrFormatMismatch)) {
			require.Nil(t, s, "session returned with error %v", err)
			return
		}
		if err != nil {
			var pe *ParseError
			require.ErrorAs(t, err, &pe, "the error is not a *ParseError")
			if !errors.Is(err, ErrTornLine) {
				require.Nil(t, s, "session returned with error %v", err)
				return
			}
			require.NotNil(t, s, "torn line without the session read before it: %v", err)
		}
		require.NoError(t, Validate(s.Messages), "invalid session")
		require.NoError(t, Validate(s.Live()), "invalid live context")
		for _, c := range s.AgentCompactions {
			require.GreaterOrEqual(t, c.FirstKept, 0)
			require.LessOrEqual(t, c.FirstKept, len(s.Messages))
			require.NoError(t, Validate(c.Replacement), "invalid replacement history")
		}
		for _, c := range s.LogCompactions {
			require.GreaterOrEqual(t, c.At, 0)
			require.LessOrEqual(t, c.At, len(s.Messages))
		}
		var buf bytes.Buffer
		require.NoError(t, Write(&buf, Canonical, s.Messages))
		back, err := Read(&buf, Canonical)
		require.NoError(t, err, "canonical copy does not read back")
		if len(s.Messages) > 0 {
			require.True(t, reflect.DeepEqual(back.Messages, s.Messages), "canonical copy differs:\n%v\n%v", describeAll(back.Messages), describeAll(s.Messages))
		}
		if s.Request != nil {
			checkRequest(t, data, s)
		}
	})
}

// checkRequest writes a request back with the messages read from it: the
// messages read back the same, and a request the reader took as it was
// (nothing skipped, dropped or repaired) is the same bytes.
func checkRequest(t *testing.T, data []byte, s *Session) {
	var buf bytes.Buffer
	require.NoError(t, s.Request.Write(&buf, s.Messages), "request does not write back")
	asRead := len(s.Skipped) == 0 && len(s.Messages) == len(s.Request.sources)
	for i := range s.Messages {
		m := &s.Messages[i]
		_, ok := s.Request.unchanged(m)
		if src := s.Request.sources[m.ID]; (m.ID == Anthropic+"-system" || m.ID == ResponsesInstructionsID) && src != nil {
			ok = sameBlocks(m.Content, src.blocks)
		}
		asRead = asRead && ok
	}
	if asRead {
		require.Equal(t, string(data), buf.String(), "request taken as it was written back changed")
	}
	back, err := Read(bytes.NewReader(buf.Bytes()), s.Format)
	require.NoError(t, err, "request written back does not read:\n%s", buf.Bytes())
	// What the format cannot hold is lost as when writing from messages
	// alone: is_error and the grouping of a tool result with text in
	// OpenAI.
	want := projectAnthropic(s.Messages)
	switch s.Format {
	case OpenAI:
		want = projectOpenAI(s.Messages)
	case Responses:
		want = projectResponses(s.Messages)
	}
	got := stripIDs(back.Messages)
	for i := range got {
		if got[i].Summary && got[i].Role == abi.RoleUser {
			// A Responses compaction item, summary and pinned; plain
			// drops both flags.
			got[i].Summary, got[i].Pinned = false, false
		}
	}
	require.True(t, len(got)+len(want) == 0 || reflect.DeepEqual(got, want),
		"request written back reads differently:\n%v\n%v", describeAll(got), describeAll(want))
}

func FuzzReadCanonical(f *testing.F) {
	fuzzRead(f, Canonical, fixture(f, "canonical.jsonl"),
		[]byte(`{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"x"}]}`+"\n"+`{"role":"user","content":[{"type":"tool_result","tool_use_id":"b"}]}`))
}

func FuzzReadAnthropic(f *testing.F) {
	fuzzRead(f, Anthropic, fixture(f, "anthropic.json"))
}

func FuzzReadOpenAI(f *testing.F) {
	fuzzRead(f, OpenAI, fixture(f, "openai.json"))
}

func FuzzReadResponses(f *testing.F) {
	fuzzRead(f, Responses, fixture(f, "responses.json"))
}

func FuzzReadClaudeCode(f *testing.F) {
	seedCorpusHead(f, "claude-code-swift-app.jsonl", 16)
	fuzzRead(f, ClaudeCode, fixture(f, "claude-code.jsonl"))
}

func FuzzReadCodex(f *testing.F) {
	seedCorpusHead(f, "codex-typescript.jsonl", 16)
	fuzzRead(f, Codex, fixture(f, "codex.jsonl"))
}

func FuzzReadCopilot(f *testing.F) {
	seedCorpusHead(f, "copilot-cli.jsonl", 16)
	fuzzRead(f, Copilot, fixture(f, "copilot.jsonl"))
}

func FuzzReadMiniSWEAgent(f *testing.F) {
	fuzzRead(f, MiniSWEAgent, fixture(f, "mini-swe-agent.traj.json"), fixture(f, "mini-swe-agent-v1.traj.json"))
}

func FuzzReadSWEAgent(f *testing.F) {
	fuzzRead(f, SWEAgent, fixture(f, "swe-agent.traj"), fixture(f, "swe-agent-fc.traj"))
}

func FuzzReadCline(f *testing.F) {
	fuzzRead(f, Cline, fixture(f, "cline.api_conversation_history.json"), fixture(f, "roo.ui_messages.json"))
}

func FuzzReadGeminiCLI(f *testing.F) {
	fuzzRead(f, GeminiCLI, fixture(f, "gemini-cli.json"))
}

func FuzzReadOpenCode(f *testing.F) {
	fuzzRead(f, OpenCode, fixture(f, "opencode.json"))
}

func FuzzReadAider(f *testing.F) {
	fuzzRead(f, Aider, fixture(f, "aider.chat.history.md"))
}

// FuzzReadDetect feeds every fixture to auto-detection.
func FuzzReadDetect(f *testing.F) {
	var seeds [][]byte
	for _, name := range []string{"canonical.jsonl", "anthropic.json", "openai.json", "claude-code.jsonl", "codex.jsonl",
		"copilot.jsonl", "mini-swe-agent.traj.json", "swe-agent.traj", "cline.api_conversation_history.json",
		"gemini-cli.json", "opencode.json", "aider.chat.history.md"} {
		seeds = append(seeds, fixture(f, name))
	}
	fuzzRead(f, "", seeds...)
}
