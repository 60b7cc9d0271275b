package formats

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// Format names, as accepted by Read and Write and returned by Detect.
const (
	// Canonical is JSONL with one abi.Message per line. The reader also
	// accepts the host's session log, whose lines are entries
	// {"type":"message","message":{...}} and {"type":"compaction",...}.
	Canonical = "canonical"
	// Anthropic is a Messages API request: {"system":...,"messages":[...]}.
	// Read keeps the body in Session.Request, and Request.Write puts the
	// messages back into it with every field and block it does not change.
	// Written from messages alone (Write), it loses message IDs, Usage, the
	// Summary flag and the Pinned flag of non-system messages; the leading
	// system messages become "system" (read back as one message), a later
	// system message becomes a user message, and thinking blocks have no
	// signature.
	Anthropic = "anthropic"
	// OpenAI is a Chat Completions request: {"messages":[...]} with
	// tool_calls and role "tool" messages; thinking travels as
	// reasoning_content. Read keeps the body as for Anthropic. Written
	// from messages alone, it loses message IDs, Usage, the Summary flag,
	// the Pinned flag of non-system messages and is_error; tool results are
	// written as "tool" messages before the rest of their user message
	// (read back as two messages), and an assistant message's thinking,
	// text and calls come back in that order.
	OpenAI = "openai"
	// Responses is an OpenAI Responses API request: {"instructions":...,
	// "input":[items]}. Read keeps the body as for Anthropic; see
	// readResponses for how items become messages. Written from messages
	// alone, it loses what writeResponses names.
	Responses = "responses"
	// ClaudeCode is a Claude Code session JSONL file.
	ClaudeCode = "claude-code"
	// Codex is an OpenAI Codex CLI rollout JSONL file.
	Codex = "codex"
	// Copilot is a GitHub Copilot CLI events JSONL file.
	Copilot = "copilot"
	// MiniSWEAgent is a mini-swe-agent trajectory (.traj.json).
	MiniSWEAgent = "mini-swe-agent"
	// SWEAgent is a SWE-agent trajectory (.traj).
	SWEAgent = "swe-agent"
	// Cline is a Cline, Roo Code or Kilo Code task history
	// (api_conversation_history.json).
	Cline = "cline"
	// GeminiCLI is a Gemini CLI chat recording (chats/session-*.json).
	GeminiCLI = "gemini-cli"
	// OpenCode is an opencode session export (opencode export).
	OpenCode = "opencode"
	// Aider is an Aider chat history (.aider.chat.history.md).
	Aider = "aider"
)

// names are the formats Read reads, in the order messages list them.
var names = []string{Canonical, Anthropic, OpenAI, ClaudeCode, Codex, Copilot, MiniSWEAgent, SWEAgent, Cline, GeminiCLI, OpenCode, Aider}

// Names returns the formats Read reads, for messages and flag help.
func Names() []string { return append([]string(nil), names...) }

// describeFormat names a format for a person.
func describeFormat(f string) string {
	switch f {
	case Canonical:
		return "a canonical session (JSONL messages or a compact-host session log)"
	case Anthropic:
		return "an Anthropic Messages request"
	case OpenAI:
		return "an OpenAI Chat Completions request"
	case Responses:
		return "an OpenAI Responses request"
	case GeminiAPI:
		return "a Gemini API generateContent request"
	case ClaudeCode:
		return "a Claude Code session"
	case Codex:
		return "a Codex CLI rollout"
	case Copilot:
		return "a Copilot CLI events file"
	case MiniSWEAgent:
		return "a mini-swe-agent trajectory"
	case SWEAgent:
		return "a SWE-agent trajectory"
	case Cline:
		return "a Cline / Roo Code / Kilo Code api_conversation_history.json"
	case GeminiCLI:
		return "a Gemini CLI chat recording"
	case OpenCode:
		return "an opencode session export"
	case Aider:
		return "an Aider chat history"
	}
	return strconv.Quote(f)
}

// Session is a conversation read from a file.
type Session struct {
	// Format is the format the session was read from.
	Format string
	// Messages is the full history: the conversation as the agent had it
	// before any compaction, its own or one AppendCompaction wrote, in
	// canonical form. It satisfies Validate. What the agent sends when it
	// resumes is Live.
	Messages []abi.Message
	// Skipped counts source records that carried no conversation content
	// (progress lines, hook events, duplicated UI events, encrypted
	// reasoning, unknown record types...), by record type.
	Skipped map[string]int
	// Repaired counts repairs made to satisfy Validate, by kind (the
	// Repair* constants).
	Repaired map[string]int
	// AgentCompactions are the compactions recorded in the file in the
	// agent's own form, in order: the agent's and those AppendCompaction
	// wrote (Ours).
	AgentCompactions []AgentCompaction
	// Subagents are the conversations of the agent's subagents (Claude
	// Code Task/Agent sidechains and agent_progress lines): not part of
	// the context the agent sends, so kept out of Messages.
	Subagents []Subagent
	// billing is the usage the reader found (BilledRequests).
	billing *billing
	// LogCompactions are the compaction entries of a host session log read
	// as Canonical, in order.
	LogCompactions []LogCompaction
	// Request is the request body an Anthropic or OpenAI session was read
	// from, to write a compacted conversation back into with every field
	// it does not change; nil for the other formats.
	Request *Request

	// ownInstructions is how many of the leading Messages the agent sends
	// itself with every request, whatever its compactions (Codex's base
	// instructions).
	ownInstructions int
}

// AgentCompaction is one compaction an agent made itself: Claude Code's
// compact_boundary with its isCompactSummary message, a Codex compacted
// record, a Cline isSummary message or an opencode summary message.
type AgentCompaction struct {
	// ID is the source's ID for the compaction, if it has one.
	ID string
	// Summary is the agent's summary text. Codex encrypts its summary in
	// recent versions; then Summary is empty and Replacement holds what
	// the agent kept.
	Summary string
	// FirstKept is the index into Session.Messages of the first message
	// after the compaction. The messages before it were folded by the
	// agent; len(Messages) if the session ends with the compaction.
	FirstKept int
	// Replacement is the history the agent continued with in place of the
	// folded messages (Codex replacement_history), without the summary.
	Replacement []abi.Message
	// Trigger is "auto" or "manual" where the agent says so.
	Trigger string
	// PreTokens is the context size the agent reported before compacting,
	// 0 when unknown.
	PreTokens int
	// Line is the 1-based line of the compaction's first record, and
	// Bytes the size of its records (with Claude Code, the boundary, the
	// summary and the copies of the kept lines after it).
	Line, Bytes int
	// Ours is set when AppendCompaction wrote the compaction; AppendedTo
	// then says what it was appended to, so it can be taken away again
	// without any other record (see FindAppended).
	Ours       bool
	AppendedTo *Appended

	// whole is set when Replacement is all the agent goes on with (a
	// Codex replacement_history): nothing before the compaction is sent
	// but the instructions the agent sends itself.
	whole bool
}

// Subagent is one subagent's conversation inside an agent's session file.
type Subagent struct {
	// ID is the agent's ID for the subagent ("" when it names none).
	ID string
	// ToolUseID is the parent's call that ran it, when recorded.
	ToolUseID string
	// Messages are its messages, one per line, in order; they need not
	// satisfy Validate.
	Messages []abi.Message
}

// LogCompaction is a compaction entry of a host session log, kept as written.
type LogCompaction struct {
	// At is the index into Session.Messages of the first message after
	// the entry.
	At int
	// Entry is the raw JSON of the entry.
	Entry json.RawMessage
}

// detectSize is how much of the input Read inspects to detect its format.
const detectSize = 64 << 10

// Read reads a session in the given format; "" detects it from the input.
//
// A malformed input yields a *ParseError naming the line (or byte offset)
// and what was expected. When the only problem is an incomplete last line of
// a JSONL file, Read returns the session read before it together with a
// *ParseError that wraps ErrTornLine.
func Read(r io.Reader, format string) (*Session, error) {
	br := bufio.NewReaderSize(r, detectSize)
	if format != "" {
		if _, ok := readers[format]; !ok {
			return nil, fmt.Errorf("%w %q; supported formats: %s", ErrUnknownFormat, format, strings.Join(names, ", "))
		}
	}
	head, err := br.Peek(detectSize)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, &ParseError{Offset: -1, Format: "detect", Reason: err.Error(), Err: err}
	}
	looks, derr := Detect(head)
	switch {
	case format == "":
		if derr != nil {
			return nil, derr
		}
		format = looks
	case derr == nil && looks != format && !compatible(format, looks):
		return nil, &MismatchError{Format: format, Looks: looks}
	}
	read := readers[format]
	switch format {
	case Anthropic, OpenAI, Responses, GeminiAPI, MiniSWEAgent, SWEAgent, Cline, GeminiCLI, OpenCode, Aider: // read whole
		br = wholeReader(br, r)
	}
	s := &Session{Format: format, Skipped: map[string]int{}, Repaired: map[string]int{}}
	err = read(br, s)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) && errors.Is(err, ErrTornLine) {
			return s, err
		}
		return nil, err
	}
	if derr != nil && len(s.Messages) == 0 && len(bytes.TrimSpace(head)) > 0 {
		// Input that no format matches and the reader found nothing in
		// is not a session of that format with no messages.
		return nil, &MismatchError{Format: format, Reason: strings.TrimPrefix(firstClause(derr), ErrUnknownFormat.Error()+": ")}
	}
	return s, nil
}

// maxWholeBuffer bounds the documents Read buffers whole; larger ones are
// read by io.ReadAll.
const maxWholeBuffer = 256 << 20

// wholeReader is br, reading from r, with room for all of the input when r
// says how much it holds: readDoc then finds the document in the buffer
// instead of growing a copy of it.
func wholeReader(br *bufio.Reader, r io.Reader) *bufio.Reader {
	n := sizeHint(r) // what br has not read yet
	if n < 0 || n+int64(br.Buffered()) >= maxWholeBuffer {
		return br
	}
	head, _ := br.Peek(br.Buffered())
	head = bytes.Clone(head)
	return bufio.NewReaderSize(io.MultiReader(bytes.NewReader(head), r), len(head)+int(n)+1)
}

// sizeHint is what is left to read in r when it says (a bytes.Reader, a
// regular file), or -1.
func sizeHint(r io.Reader) int64 {
	switch r := r.(type) {
	case interface{ Len() int }:
		return int64(r.Len())
	case interface{ Stat() (fs.FileInfo, error) }:
		if fi, err := r.Stat(); err == nil && fi.Mode().IsRegular() {
			if s, ok := r.(io.Seeker); ok {
				if at, err := s.Seek(0, io.SeekCurrent); err == nil && at <= fi.Size() {
					return fi.Size() - at
				}
			}
		}
	}
	return -1
}

// compatible reports whether input detected as looks may still be in
// format: detection calls a request with nothing Anthropic-only in it
// OpenAI, and a mini-swe-agent trajectory holds Chat Completions messages;
// their readers tell.
func compatible(format, looks string) bool {
	switch format {
	case Anthropic, MiniSWEAgent:
		return looks == OpenAI
	case OpenAI:
		return looks == Anthropic
	}
	return false
}

// ReadFile reads the session in the file at path, detecting its format.
// Errors name the file.
func ReadFile(path string) (*Session, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := Read(f, "")
	var pe *ParseError
	if errors.As(err, &pe) {
		pe.Path = path
	}
	return s, err
}

// Write writes msgs in format: Canonical, Anthropic or OpenAI, from the
// messages alone; to write into the request a session was read from, use
// Session.Request.Write. It does not repair: messages that satisfy Validate read back valid and equal, within
// what the format can hold (Canonical holds everything; see Anthropic and
// OpenAI for what they lose).
func Write(w io.Writer, format string, msgs []abi.Message) error {
	switch format {
	case Canonical:
		return writeCanonical(w, msgs)
	case Anthropic:
		return writeAnthropic(w, msgs)
	case OpenAI:
		return writeOpenAI(w, msgs)
	case Responses:
		return writeResponses(w, msgs)
	case GeminiAPI:
		return writeGeminiAPI(w, msgs)
	}
	return fmt.Errorf("%w %q for writing", ErrUnknownFormat, format)
}

// readFunc fills s from r.
type readFunc func(r *bufio.Reader, s *Session) error

var readers map[string]readFunc

func init() {
	readers = map[string]readFunc{
		Canonical:    readCanonical,
		Anthropic:    readAnthropic,
		OpenAI:       readOpenAI,
		Responses:    readResponses,
		GeminiAPI:    readGeminiAPI,
		ClaudeCode:   readClaudeCode,
		Codex:        readCodex,
		Copilot:      readCopilot,
		MiniSWEAgent: readMiniSWEAgent,
		SWEAgent:     readSWEAgent,
		Cline:        readCline,
		GeminiCLI:    readGeminiCLI,
		OpenCode:     readOpenCode,
		Aider:        readAider,
	}
}

// readDoc reads a whole JSON document, an object, and unmarshals it into v.
func readDoc(r *bufio.Reader, format string, v any) ([]byte, error) {
	return readJSONDoc(r, format, v, '{')
}

// readJSONDoc reads a whole JSON document that opens with open ('{' or
// '[') and unmarshals it into v.
func readJSONDoc(r *bufio.Reader, format string, v any, open byte) ([]byte, error) {
	what := map[byte]string{'{': "a JSON object", '[': "a JSON array"}[open]
	data, err := r.Peek(r.Size())
	if errors.Is(err, io.EOF) {
		err = nil // all of it is in the buffer, which nothing reads after
	} else {
		data, err = io.ReadAll(io.LimitReader(r, maxDocSize+1))
	}
	if err != nil {
		return nil, &ParseError{Offset: -1, Format: format, Reason: err.Error(), Err: err}
	}
	if len(data) > maxDocSize {
		return nil, &ParseError{Offset: maxDocSize, Format: format, Reason: "document larger than 1 GiB"}
	}
	start := 0
	for start < len(data) && (data[start] == ' ' || data[start] == '\t' || data[start] == '\r' || data[start] == '\n') {
		start++
	}
	if start == len(data) {
		return nil, &ParseError{Line: 1, Offset: 0, Format: format, Reason: "empty input, expected " + what}
	}
	if data[start] != open {
		return nil, &ParseError{Line: lineOf(data, int64(start)), Offset: int64(start), Format: format,
			Reason: "expected " + what + ", got " + snippet(data[start:])}
	}
	if err := decode(data, v); err != nil {
		return nil, docError(format, data, err)
	}
	return data, nil
}

// finish normalizes the messages the reader built and fixes up the
// compaction indexes.
func finish(s *Session, msgs []abi.Message, idPrefix string) {
	marks := make([]int, 0, len(s.AgentCompactions)+len(s.LogCompactions))
	for _, c := range s.AgentCompactions {
		marks = append(marks, c.FirstKept)
	}
	for _, c := range s.LogCompactions {
		marks = append(marks, c.At)
	}
	msgs, marks = normalize(msgs, marks, idPrefix, s.Repaired)
	for i := range s.AgentCompactions {
		s.AgentCompactions[i].FirstKept = marks[i]
	}
	for i := range s.LogCompactions {
		s.LogCompactions[i].At = marks[len(s.AgentCompactions)+i]
	}
	s.Messages = msgs
}

// firstClause is an error's message up to its first semicolon.
func firstClause(err error) string {
	msg, _, _ := strings.Cut(err.Error(), ";")
	return msg
}
