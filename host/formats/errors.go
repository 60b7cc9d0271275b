package formats

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/compact-host/compact-host/internal/jsontype"
)

// ErrUnknownFormat is returned by Detect and Read when the input matches no
// known format, and by Read and Write when asked for a format they do not
// know.
var ErrUnknownFormat = errors.New("formats: unknown format")

// ErrFormatMismatch is returned (as a *MismatchError) by Read when the
// input is not in the format it was asked to read.
var ErrFormatMismatch = errors.New("formats: input not in the format named")

// MismatchError is input given to Read with a format it is not in.
type MismatchError struct {
	// Format is the format Read was asked to read.
	Format string
	// Looks is the format the input looks like, "" when none.
	Looks string
	// Reason says why it looks like none, when Looks is "".
	Reason string
}

func (e *MismatchError) Error() string {
	if e.Looks != "" {
		return fmt.Sprintf("formats: the input is not %s but looks like %s; name --format %s, or leave --format out to detect it (supported formats: %s)",
			describeFormat(e.Format), describeFormat(e.Looks), e.Looks, strings.Join(Names(), ", "))
	}
	return fmt.Sprintf("formats: the input is not %s (%s) nor any other supported format; supported formats: %s",
		describeFormat(e.Format), e.Reason, strings.Join(Names(), ", "))
}

func (e *MismatchError) Unwrap() error { return ErrFormatMismatch }

// unknownFormat is the error for input no format matches.
func unknownFormat(reason string) error {
	return fmt.Errorf("%w: %s; supported formats: %s (name one with --format if the input is one of them)",
		ErrUnknownFormat, reason, strings.Join(Names(), ", "))
}

// ErrTornLine marks an incomplete last line of a JSONL file, as left by an
// agent killed while writing. Read returns it (inside a *ParseError) together
// with the session read up to that line.
var ErrTornLine = errors.New("formats: incomplete last line")

// ParseError reports input that does not follow its format. Its message names
// the place, e.g. `session.jsonl:17: codex: expected a JSON object, got "…"`.
type ParseError struct {
	// Path is the file name when the input came from ReadFile.
	Path string
	// Line is the 1-based line of the problem, 0 when unknown.
	Line int
	// Offset is the byte offset of the problem in a JSON document (not
	// JSONL), -1 when unknown.
	Offset int64
	// Format is the format being read.
	Format string
	// Reason says what was expected and what was found.
	Reason string
	// Err is the underlying error, if any: ErrTornLine, a *json.SyntaxError,
	// a *json.UnmarshalTypeError or an I/O error.
	Err error
}

func (e *ParseError) Error() string {
	where := e.Path
	if where == "" {
		where = "input"
	}
	if e.Line > 0 {
		where += ":" + strconv.Itoa(e.Line)
	} else if e.Offset >= 0 {
		where += ": offset " + strconv.FormatInt(e.Offset, 10)
	}
	return where + ": " + e.Format + ": " + e.Reason
}

func (e *ParseError) Unwrap() error { return e.Err }

// snippet quotes the start of b for an error message.
func snippet(b []byte) string {
	const max = 40
	if len(b) <= max {
		return strconv.Quote(string(b))
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return strconv.Quote(string(b[:cut]) + "…")
}

// jsonReason turns an encoding/json error into a reason for a ParseError.
func jsonReason(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &te):
		// Embedded Go structs show in the path; they are not JSON keys.
		field := strings.ReplaceAll(te.Field, "oaMessage.", "")
		if field == "" {
			field = "value"
		}
		return fmt.Sprintf("%s: expected %s, got JSON %s", field, jsontype.Expected(te), te.Value)
	}
	return err.Error()
}

// lineOf returns the 1-based line that byte offset off of data falls on.
func lineOf(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line := 1
	for _, c := range data[:off] {
		if c == '\n' {
			line++
		}
	}
	return line
}

// docError wraps a JSON decoding error of a whole-document format.
func docError(format string, data []byte, err error) *ParseError {
	pe := &ParseError{Format: format, Offset: -1, Reason: jsonReason(err), Err: err}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		pe.Offset = se.Offset
	case errors.As(err, &te):
		pe.Offset = te.Offset
	}
	if pe.Offset >= 0 {
		pe.Line = lineOf(data, pe.Offset)
	}
	return pe
}
