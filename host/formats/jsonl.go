package formats

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxLineSize bounds one JSONL line. Tool outputs inline in a line can be
// large; real sessions stay far below this.
const maxLineSize = 64 << 20

// maxDocSize bounds a whole-document (JSON) session file.
const maxDocSize = 1 << 30

// lineReader yields the lines of a JSONL stream of any length up to
// maxLineSize, reusing one buffer.
type lineReader struct {
	r    *bufio.Reader
	buf  []byte
	line int
}

// next returns the next line without its line ending, whether a newline
// terminated it, and io.EOF after the last line. The returned slice is valid
// until the next call.
func (lr *lineReader) next() ([]byte, bool, error) {
	lr.buf = lr.buf[:0]
	for {
		frag, err := lr.r.ReadSlice('\n')
		if len(lr.buf)+len(frag) > maxLineSize {
			lr.line++
			return nil, false, fmt.Errorf("line longer than %d MiB", maxLineSize>>20)
		}
		lr.buf = append(lr.buf, frag...)
		switch {
		case err == nil:
			lr.line++
			return bytes.TrimRight(lr.buf, "\r\n"), true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(lr.buf) == 0 {
				return nil, false, io.EOF
			}
			lr.line++
			return bytes.TrimRight(lr.buf, "\r"), false, nil
		default:
			lr.line++
			return nil, false, err
		}
	}
}

// lineHandler decodes one non-blank JSONL line. A returned error becomes a
// *ParseError naming the line.
type lineHandler func(line []byte, lineNo int) error

// errLineDone lets a handler stop reading early without an error.
var errLineDone = errors.New("done")

// readJSONL runs h over every non-blank line of r. It returns a *ParseError
// for the first bad line; if only the unterminated last line is bad and looks
// cut short, the *ParseError wraps ErrTornLine and the caller keeps what was
// read before it.
func readJSONL(r *bufio.Reader, format string, h lineHandler) error {
	lr := &lineReader{r: r}
	for {
		line, terminated, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &ParseError{Line: lr.line, Offset: -1, Format: format, Reason: err.Error(), Err: err}
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' {
			return &ParseError{Line: lr.line, Offset: -1, Format: format,
				Reason: "expected a JSON object, got " + snippet(line)}
		}
		if err := h(line, lr.line); err != nil {
			if errors.Is(err, errLineDone) {
				return nil
			}
			var pe *ParseError
			if errors.As(err, &pe) {
				return pe
			}
			if !terminated && isTruncatedJSON(line, err) {
				return tornError(lr.line, format)
			}
			return &ParseError{Line: lr.line, Offset: -1, Format: format, Reason: jsonReason(err), Err: err}
		}
	}
}

func tornError(line int, format string) *ParseError {
	return &ParseError{Line: line, Offset: -1, Format: format,
		Reason: "the last line is incomplete (the file was cut while being written)", Err: ErrTornLine}
}

// isTruncatedJSON reports whether err is a syntax error at the very end of
// line, the mark of a line cut short.
func isTruncatedJSON(line []byte, err error) bool {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return false
	}
	return se.Offset >= int64(len(line))
}
