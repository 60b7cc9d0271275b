package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/internal/sessionio"
	"github.com/compact-host/compact-host/internal/suggest"
)

// readable and writable are the formats the API reads and writes.
var (
	readable = []string{formats.Canonical, formats.Anthropic, formats.OpenAI, formats.ClaudeCode, formats.Codex,
		formats.Copilot, formats.MiniSWEAgent, formats.SWEAgent}
	writable = sessionio.Writable
)

// checkFormats rejects unknown input and output formats before any work.
func checkFormats(in, out string) *apiError {
	if in != "" && !slices.Contains(readable, in) {
		return errorf(http.StatusBadRequest, CodeUnknownFormat, "format %q: want one of %s, or omit it to detect the format%s",
			in, strings.Join(readable, ", "), suggest.Hint(in, readable))
	}
	if out != "" && !slices.Contains(writable, out) {
		return unknownName(CodeUnknownFormat, "output_format", out, writable)
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
	// A complete last line without its newline is whole, not torn: a
	// request body was not cut by a crash.
	if last := data[bytes.LastIndexByte(data, '\n')+1:]; len(bytes.TrimSpace(last)) > 0 && json.Valid(last) {
		data = append(data[:len(data):len(data)], '\n')
	}
	in, err := sessionio.Read(e, "session", data, format)
	if err != nil {
		var (
			pe  *formats.ParseError
			inv *sessionio.InvalidError
			me  *formats.MismatchError
		)
		switch {
		case errors.As(err, &pe):
			ae := &apiError{Status: http.StatusBadRequest, Code: CodeBadSession, Message: err.Error(), Line: pe.Line}
			if pe.Line == 0 && pe.Offset >= 0 {
				off := pe.Offset
				ae.Offset = &off
			}
			return nil, ae
		case errors.As(err, &inv):
			return nil, errorf(http.StatusBadRequest, CodeInvalidSession, "%v", err)
		case errors.As(err, &me):
			// The formats package words this for the CLI (--format).
			if me.Looks != "" {
				return nil, errorf(http.StatusBadRequest, CodeUnknownFormat, "session: the input is not %s but looks like %s; set \"format\": %q, or omit \"format\" to detect it",
					me.Format, me.Looks, me.Looks)
			}
			return nil, errorf(http.StatusBadRequest, CodeUnknownFormat, "session: the input is not %s (%s) nor any other supported format; the formats are %s",
				me.Format, me.Reason, strings.Join(readable, ", "))
		case errors.Is(err, formats.ErrUnknownFormat):
			msg, _, _ := strings.Cut(err.Error(), " (name one with --format")
			return nil, errorf(http.StatusBadRequest, CodeUnknownFormat, "%s; if it is one of them, name it in \"format\"", msg)
		default:
			msg := strings.TrimPrefix(err.Error(), "host: load session: ")
			ae := &apiError{Status: http.StatusBadRequest, Code: CodeBadSession, Message: msg}
			// A session log's errors name the line as "session:N: ...".
			fmt.Sscanf(msg, "session:%d:", &ae.Line)
			return nil, ae
		}
	}
	return in, nil
}

// input is a session read from a request.
type input = sessionio.Input

// writeSession renders the session's current state in format: the
// session log as a JSON string for canonical, the compacted request
// object otherwise.
func writeSession(s *host.Session, format string) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := sessionio.Write(&b, s, format); err != nil {
		return nil, err
	}
	if format == formats.Canonical {
		return json.Marshal(b.String())
	}
	return json.RawMessage(bytes.TrimSpace(b.Bytes())), nil
}

func snippet(b []byte) string {
	const n = 40
	if len(b) <= n {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q…", b[:n])
}
