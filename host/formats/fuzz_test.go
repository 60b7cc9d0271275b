package formats

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"
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
		if err != nil && format == "" && errors.Is(err, ErrUnknownFormat) {
			if s != nil {
				t.Fatalf("session returned with error %v", err)
			}
			return
		}
		if err != nil && format != "" && errors.Is(err, ErrFormatMismatch) {
			if s != nil {
				t.Fatalf("session returned with error %v", err)
			}
			return
		}
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error is not a *ParseError: %v", err)
			}
			if !errors.Is(err, ErrTornLine) {
				if s != nil {
					t.Fatalf("session returned with error %v", err)
				}
				return
			}
			if s == nil {
				t.Fatalf("torn line without the session read before it: %v", err)
			}
		}
		if err := Validate(s.Messages); err != nil {
			t.Fatalf("invalid session: %v", err)
		}
		for _, c := range s.AgentCompactions {
			if c.FirstKept < 0 || c.FirstKept > len(s.Messages) {
				t.Fatalf("FirstKept %d out of range [0, %d]", c.FirstKept, len(s.Messages))
			}
			if err := Validate(c.Replacement); err != nil {
				t.Fatalf("invalid replacement history: %v", err)
			}
		}
		for _, c := range s.LogCompactions {
			if c.At < 0 || c.At > len(s.Messages) {
				t.Fatalf("log compaction at %d out of range [0, %d]", c.At, len(s.Messages))
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, Canonical, s.Messages); err != nil {
			t.Fatal(err)
		}
		back, err := Read(&buf, Canonical)
		if err != nil {
			t.Fatalf("canonical copy does not read back: %v", err)
		}
		if len(s.Messages) > 0 && !reflect.DeepEqual(back.Messages, s.Messages) {
			t.Fatalf("canonical copy differs:\n%v\n%v", describeAll(back.Messages), describeAll(s.Messages))
		}
	})
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

// FuzzReadDetect feeds every fixture to auto-detection.
func FuzzReadDetect(f *testing.F) {
	var seeds [][]byte
	for _, name := range []string{"canonical.jsonl", "anthropic.json", "openai.json", "claude-code.jsonl", "codex.jsonl",
		"copilot.jsonl", "mini-swe-agent.traj.json", "swe-agent.traj"} {
		seeds = append(seeds, fixture(f, name))
	}
	fuzzRead(f, "", seeds...)
}
