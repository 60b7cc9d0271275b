package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
)

// readable and writable are the formats the API reads and writes.
var (
	readable = []string{formats.Canonical, formats.Anthropic, formats.OpenAI, formats.ClaudeCode, formats.Codex,
		formats.Copilot, formats.MiniSWEAgent, formats.SWEAgent}
	writable = []string{formats.Canonical, formats.Anthropic, formats.OpenAI}
)

// input is a session read from a request.
type input struct {
	session *host.Session
	format  string
	// pendingTail is true when the last assistant message's tool calls
	// still wait for their results (the agent is running them).
	pendingTail bool
	skipped     map[string]int
	repaired    map[string]int
	warnings    []string
}

// checkFormats rejects unknown input and output formats before any work.
func checkFormats(in, out string) *apiError {
	if in != "" && !slices.Contains(readable, in) {
		return errorf(http.StatusBadRequest, CodeUnknownFormat, "format %q: want one of %s, or empty to detect it", in, strings.Join(readable, ", "))
	}
	if out != "" && !slices.Contains(writable, out) {
		return errorf(http.StatusBadRequest, CodeUnknownFormat, "output_format %q: want canonical, anthropic or openai", out)
	}
	return nil
}

// sessionBytes is the session file a request carries: a string's
// content, an array of canonical messages as JSONL, or an object as is.
func sessionBytes(raw json.RawMessage, format string) ([]byte, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("session is required: a JSON object, an array of messages, or a string holding a JSONL file")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("session: %v", err)
		}
		return []byte(s), nil
	case '[':
		if format != "" && format != formats.Canonical {
			return nil, badRequest("session: an array is a list of canonical messages, but format is %q", format)
		}
		var msgs []json.RawMessage
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return nil, badRequest("session: %v", err)
		}
		if len(msgs) == 0 {
			return nil, badRequest("session: the array holds no messages")
		}
		var b bytes.Buffer
		for _, m := range msgs {
			if err := json.Compact(&b, m); err != nil {
				return nil, badRequest("session: %v", err)
			}
			b.WriteByte('\n')
		}
		return b.Bytes(), nil
	case '{':
		return raw, nil
	}
	return nil, badRequest("session: expected a JSON object, an array of messages or a string, got %s", snippet(raw))
}

// readSession reads the session of a request into a session of e.
func readSession(e *host.Engine, raw json.RawMessage, format string) (*input, *apiError) {
	data, aerr := sessionBytes(raw, format)
	if aerr != nil {
		return nil, aerr
	}
	in := &input{}
	if (format == "" || format == formats.Canonical) && host.IsSessionLog(data) {
		s, warn, aerr := loadLog(e, data)
		if aerr != nil {
			return nil, aerr
		}
		in.session, in.format = s, formats.Canonical
		if warn != "" {
			in.warnings = append(in.warnings, warn)
		}
	} else {
		sess, err := formats.Read(bytes.NewReader(data), format)
		if err != nil {
			var pe *formats.ParseError
			switch {
			case errors.As(err, &pe) && errors.Is(err, formats.ErrTornLine) && sess != nil:
				pe.Path = "session"
				in.warnings = append(in.warnings, fmt.Sprintf("%v; the %d messages before it were read", err, len(sess.Messages)))
			case errors.As(err, &pe):
				pe.Path = "session"
				ae := &apiError{Status: http.StatusBadRequest, Code: CodeBadSession, Message: err.Error(), Line: pe.Line}
				if pe.Line == 0 && pe.Offset >= 0 {
					off := pe.Offset
					ae.Offset = &off
				}
				return nil, ae
			case errors.Is(err, formats.ErrUnknownFormat):
				return nil, errorf(http.StatusBadRequest, CodeUnknownFormat, "session: %v; name it in \"format\"", err)
			default:
				return nil, errorf(http.StatusBadRequest, CodeBadSession, "session: %v", err)
			}
		}
		in.format, in.skipped, in.repaired = sess.Format, sess.Skipped, sess.Repaired
		if len(sess.AgentCompactions) > 0 {
			in.warnings = append(in.warnings, fmt.Sprintf("the agent compacted this session %d times itself; its original history was read", len(sess.AgentCompactions)))
		}
		in.session = e.NewSession()
		if err := in.session.Append(sess.Messages...); err != nil {
			return nil, errorf(http.StatusBadRequest, CodeBadSession, "session: %v", err)
		}
	}
	if len(in.skipped) == 0 {
		in.skipped = nil
	}
	if len(in.repaired) == 0 {
		in.repaired = nil
	}
	ctx := in.session.Context()
	if err := host.Validate(ctx, false); err != nil {
		if err2 := host.Validate(ctx, true); err2 != nil {
			return nil, errorf(http.StatusBadRequest, CodeInvalidSession, "session: %v", err)
		}
		in.pendingTail = true
	}
	return in, nil
}

// loadLog replays a session log. The engine replays logs from files, so
// the log is spooled to a temporary one.
func loadLog(e *host.Engine, data []byte) (*host.Session, string, *apiError) {
	f, err := os.CreateTemp("", "compact-host-serve-*.jsonl")
	if err != nil {
		return nil, "", errorf(http.StatusInternalServerError, CodeInternal, "spool the session log: %v", err)
	}
	path := f.Name()
	defer os.Remove(path)
	// A complete last line without its newline is whole, not torn: a
	// request body was not cut by a crash.
	if last := data[bytes.LastIndexByte(data, '\n')+1:]; len(bytes.TrimSpace(last)) > 0 && json.Valid(last) {
		data = append(data[:len(data):len(data)], '\n')
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, "", errorf(http.StatusInternalServerError, CodeInternal, "spool the session log: %v", err)
	}
	s, err := e.LoadSession(path)
	if err != nil {
		msg := strings.TrimPrefix(strings.ReplaceAll(err.Error(), path, "session"), "host: load session: ")
		ae := &apiError{Status: http.StatusBadRequest, Code: CodeBadSession, Message: msg}
		// The message names the line as "session:N: ...".
		fmt.Sscanf(msg, "session:%d:", &ae.Line)
		return nil, "", ae
	}
	warn := ""
	if t := s.Torn(); t != nil {
		warn = "session: " + strings.ReplaceAll(t.String(), path, "session") + "; it was left out"
	}
	return s, warn, nil
}

// writeSession renders the session's current state in format: the
// session log (every message and the compactions, so undoable) as a JSON
// string for canonical, the compacted request object otherwise.
func writeSession(s *host.Session, format string) (json.RawMessage, error) {
	var b bytes.Buffer
	if format == formats.Canonical {
		if err := s.WriteLog(&b); err != nil {
			return nil, err
		}
		return json.Marshal(b.String())
	}
	if err := formats.Write(&b, format, s.Context()); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimSpace(b.Bytes())), nil
}

// outputFormat is the format to answer in: the one asked for, else the
// input's where it can be written, else canonical.
func outputFormat(asked, in string) string {
	if asked != "" {
		return asked
	}
	if in == formats.Anthropic || in == formats.OpenAI {
		return in
	}
	return formats.Canonical
}

func snippet(b []byte) string {
	const n = 40
	if len(b) <= n {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q…", b[:n])
}
