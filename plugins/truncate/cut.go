package truncate

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	sdk "github.com/compact-host/compact-host/sdk/core"
)

// BytesPerToken is the estimate the truncator sizes output with: a token
// per four bytes. The cap is enforced against this estimate (the output
// never holds more than 4×MaxTokens bytes, notice included); asking the
// host's tokenizer for every cut would cost a host call per candidate.
const BytesPerToken = 4

// Default line counts of the head-tail category.
const (
	DefaultHeadLines = 60
	DefaultTailLines = 40
)

// Truncator implements sdk.Truncator for the four categories. Its zero
// value uses DefaultHeadLines and DefaultTailLines; it is safe for
// concurrent use.
type Truncator struct {
	// HeadLines and TailLines bound the head-tail category before the
	// token cap applies.
	HeadLines, TailLines int
}

var _ sdk.Truncator = Truncator{}

// Truncate implements sdk.Truncator. Output that fits is returned as it
// is. A cut never splits a UTF-8 sequence or a CRLF pair, and the notice
// uses the output's own line ending.
func (t Truncator) Truncate(ctx context.Context, host sdk.Host, req *abi.TruncateRequest) (*abi.TruncateResponse, error) {
	switch req.Category {
	case HeadTail, MatchList, FileContent, Generic:
	default:
		return nil, abi.Errorf(abi.CodeUnsupported, "truncate: unknown category %q (have %v)", req.Category, Categories)
	}
	if req.MaxTokens <= 0 {
		return nil, abi.Errorf(abi.CodeInvalidRequest, "truncate: max_tokens must be positive, got %d", req.MaxTokens)
	}
	budget := req.MaxTokens * BytesPerToken
	if req.MaxTokens > len(req.Content) || len(req.Content) <= budget {
		return &abi.TruncateResponse{Content: req.Content}, nil
	}
	head, tail := t.HeadLines, t.TailLines
	if head <= 0 {
		head = DefaultHeadLines
	}
	if tail <= 0 {
		tail = DefaultTailLines
	}
	return cut(req.Content, req.Category, budget, head, tail), nil
}

// output describes one cut: content[:headEnd] and content[tailStart:] are
// kept, the rest is replaced by a notice.
type output struct {
	content            []byte
	headEnd, tailStart int
	totalLines         int
}

func cut(content []byte, category string, budget, headLines, tailLines int) *abi.TruncateResponse {
	o := output{content: content, totalLines: countLines(content)}
	nl := "\n"
	if i := bytes.IndexByte(content, '\n'); i > 0 && content[i-1] == '\r' {
		nl = "\r\n"
	}
	// Reserve room for the longest notice this output can need: its
	// numbers cannot exceed the totals.
	worst := notice(category, o.totalLines, len(content), o.totalLines, o.totalLines, o.totalLines, nl, 0)
	level := 0
	for level < 2 && len(worst)+2*len(nl) > budget {
		level++
		worst = notice(category, o.totalLines, len(content), o.totalLines, o.totalLines, o.totalLines, nl, level)
	}
	avail := budget - len(worst) - 2*len(nl)
	if avail < 0 {
		// Not even the shortest notice fits: return what does of it.
		return &abi.TruncateResponse{Content: []byte(cutString(worst, budget)), Truncated: true, OmittedBytes: len(content), OmittedLines: o.totalLines}
	}
	switch category {
	case HeadTail:
		limitHead := nthLineEnd(content, headLines)
		limitTail := nthLineStartFromEnd(content, tailLines)
		headShare := avail * 60 / 100
		o.headEnd = headCut(content, min(headShare, limitHead))
		if limitHead <= headShare {
			o.headEnd = limitHead
		}
		tailShare := avail - o.headEnd
		o.tailStart = tailCut(content, len(content)-limitTail, tailShare)
	case FileContent:
		o.headEnd = headCut(content, avail/2)
		o.tailStart = tailCut(content, len(content), avail-o.headEnd)
	default: // MatchList, Generic
		o.headEnd = headCut(content, avail)
		o.tailStart = len(content)
	}
	if o.tailStart < o.headEnd {
		o.tailStart = o.headEnd
	}
	return o.response(category, nl, level)
}

func (o output) response(category, nl string, level int) *abi.TruncateResponse {
	c := o.content
	headFull := countNewlines(c[:o.headEnd])
	tailFull := 0
	if o.tailStart < len(c) && (o.tailStart == 0 || c[o.tailStart-1] == '\n') {
		tailFull = countLines(c[o.tailStart:])
	} else if o.tailStart < len(c) {
		// The tail starts mid-line: that line is not shown in full.
		tailFull = countLines(c[o.tailStart:]) - 1
	}
	omittedLines := o.totalLines - headFull - tailFull
	omittedBytes := o.tailStart - o.headEnd
	firstOmitted := headFull + 1
	lastOmitted := o.totalLines - tailFull
	msg := notice(category, omittedLines, omittedBytes, o.totalLines, firstOmitted, lastOmitted, nl, level)

	out := make([]byte, 0, o.headEnd+len(msg)+2*len(nl)+len(c)-o.tailStart)
	out = append(out, c[:o.headEnd]...)
	if o.headEnd > 0 && c[o.headEnd-1] != '\n' {
		out = append(out, nl...)
	}
	out = append(out, msg...)
	if o.tailStart < len(c) {
		out = append(out, nl...)
		out = append(out, c[o.tailStart:]...)
	} else if c[len(c)-1] == '\n' {
		out = append(out, nl...)
	}
	return &abi.TruncateResponse{Content: out, Truncated: true, OmittedBytes: omittedBytes, OmittedLines: omittedLines}
}

// notice says what a cut left out and how to see it. Level 1 and 2 are
// shorter forms for tight caps.
func notice(category string, lines, bytes, total, first, last int, nl string, level int) string {
	switch level {
	case 1:
		return fmt.Sprintf("[… %s lines, %s bytes omitted]", group(lines), group(bytes))
	case 2:
		return "[… truncated]"
	}
	what := fmt.Sprintf("%s of %s lines (%s bytes) omitted", group(lines), group(total), group(bytes))
	switch category {
	case HeadTail:
		return "[… " + what + ". To see them, re-run the command with a narrower scope, e.g. piped through grep, head -n or tail -n.]"
	case MatchList:
		return "[… " + what + " from the end of the results. To see them, narrow the search: a more specific pattern, a path or glob, or a result limit.]"
	case FileContent:
		return fmt.Sprintf("[… lines %s–%s: %s. To see them, read the file again with an offset and a limit, starting at line %s.]", group(first), group(last), what, group(first))
	default:
		return "[… " + what + " from the end. To see them, ask for a narrower output, or page through it with an offset.]"
	}
}

// group writes n with thousands separators.
func group(n int) string {
	s := strconv.Itoa(n)
	if n < 0 || len(s) <= 3 {
		return s
	}
	var b []byte
	for i, ch := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, ch)
	}
	return string(b)
}

// countLines counts lines, a last line without a newline included.
func countLines(b []byte) int {
	n := countNewlines(b)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// nthLineEnd returns the offset just past the n-th line (len(b) if b has
// fewer lines).
func nthLineEnd(b []byte, n int) int {
	off := 0
	for i := 0; i < n; i++ {
		j := bytes.IndexByte(b[off:], '\n')
		if j < 0 {
			return len(b)
		}
		off += j + 1
	}
	return off
}

// nthLineStartFromEnd returns the offset of the first of the last n lines.
func nthLineStartFromEnd(b []byte, n int) int {
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(b[:end], '\n')
		if j < 0 {
			return 0
		}
		if i == n-1 {
			return j + 1
		}
		end = j
	}
	return end
}

// headCut returns the end of the longest head of b of at most n bytes that
// ends on a line boundary, or, when the first line alone is longer, on a
// character boundary that does not split a CRLF pair.
func headCut(b []byte, n int) int {
	if n >= len(b) {
		return len(b)
	}
	if n <= 0 {
		return 0
	}
	if i := bytes.LastIndexByte(b[:n], '\n'); i >= 0 {
		return i + 1
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	if n > 0 && b[n-1] == '\r' && b[n] == '\n' {
		n--
	}
	return n
}

// tailCut returns where the kept tail of b starts: at most min(reach, n)
// bytes from the end, on a line boundary where one is in range, else on a
// character boundary that does not split a CRLF pair. reach is the size of
// the last lines a category keeps.
func tailCut(b []byte, reach, n int) int {
	start := len(b) - min(reach, n)
	if n <= 0 {
		return len(b)
	}
	if start <= 0 {
		return 0
	}
	if b[start-1] == '\n' {
		return start
	}
	if i := bytes.IndexByte(b[start:], '\n'); i >= 0 && start+i+1 < len(b) {
		return start + i + 1
	}
	for start < len(b) && !utf8.RuneStart(b[start]) {
		start++
	}
	if start < len(b) && b[start-1] == '\r' && b[start] == '\n' {
		start++
	}
	return start
}

func cutString(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
