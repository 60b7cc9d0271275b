package abi

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The frame header is JSON, written and read here without reflection: the
// codec runs on both sides of every call, inside wasm plugins too, and
// encoding/json made up most of a small call's cost there. The reader is
// strict JSON (RFC 8259) with the lenience the spec grants: unknown keys
// are skipped, null reads as the zero value.

// jsonWriter appends JSON values. comma records that a value was written
// in the current object or array, so the next one needs a separator.
type jsonWriter struct {
	b     []byte
	comma bool
}

func (w *jsonWriter) sep() {
	if w.comma {
		w.b = append(w.b, ',')
	}
	w.comma = false
}

func (w *jsonWriter) open()  { w.sep(); w.b = append(w.b, '{') }
func (w *jsonWriter) close() { w.b = append(w.b, '}'); w.comma = true }

func (w *jsonWriter) openArray()  { w.sep(); w.b = append(w.b, '[') }
func (w *jsonWriter) closeArray() { w.b = append(w.b, ']'); w.comma = true }

// key writes an object key; the keys of this package need no escaping.
func (w *jsonWriter) key(k string) {
	w.sep()
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *jsonWriter) str(k, v string) {
	w.key(k)
	w.b = appendJSONString(w.b, v)
	w.comma = true
}

func (w *jsonWriter) strOmit(k, v string) {
	if v != "" {
		w.str(k, v)
	}
}

func (w *jsonWriter) int(k string, v int) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, int64(v), 10)
	w.comma = true
}

func (w *jsonWriter) intOmit(k string, v int) {
	if v != 0 {
		w.int(k, v)
	}
}

func (w *jsonWriter) bool(k string, v bool) {
	w.key(k)
	w.b = strconv.AppendBool(w.b, v)
	w.comma = true
}

func (w *jsonWriter) boolOmit(k string, v bool) {
	if v {
		w.bool(k, v)
	}
}

func (w *jsonWriter) strs(k string, vs []string) {
	w.key(k)
	w.openArray()
	for _, v := range vs {
		w.sep()
		w.b = appendJSONString(w.b, v)
		w.comma = true
	}
	w.closeArray()
}

func (w *jsonWriter) strsOmit(k string, vs []string) {
	if len(vs) > 0 {
		w.strs(k, vs)
	}
}

// raw writes v, which must be one JSON value, as it is.
func (w *jsonWriter) raw(k string, v []byte) error {
	r := jsonReader{b: v}
	r.ws()
	r.skip()
	r.ws()
	if r.err == nil && r.i != len(v) {
		r.fail("trailing data")
	}
	if r.err != nil {
		return fmt.Errorf("field %s is not one JSON value: %w", k, r.err)
	}
	w.key(k)
	w.b = append(w.b, v...)
	w.comma = true
	return nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted. Invalid UTF-8 becomes U+FFFD, as in
// encoding/json, so the header is always valid UTF-8.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// maxDepth bounds the nesting of values the reader skips or reads, so a
// hostile header cannot exhaust the stack.
const maxDepth = 1000

// jsonReader reads one JSON text. Its methods record the first error and
// from then on read nothing; callers check err at the end.
type jsonReader struct {
	b     []byte
	i     int
	depth int
	err   error
	text  arena
}

// arena holds the bytes of the strings a decode returns. A request of
// 10,000 messages has some 60,000 strings; one allocation each made up
// most of its decoding inside a Go wasm plugin, where an allocation costs
// several times what it does natively. The arena copies them into a few
// large chunks instead, growing geometrically up to what the frame can
// still hold. Bytes handed out are never written again, so the strings
// viewing them are immutable; a string kept after the decode keeps its
// chunk alive.
type arena struct {
	buf []byte
	// left bounds what the rest of the decode can copy, to size chunks:
	// the bytes of the frame not yet copied, or of its header alone when
	// the document's blobs are byte slices that alias the frame.
	left int
}

// minChunk is the smallest chunk after the first, which is no larger
// than the frame needs.
const minChunk = 64 << 10

// copy returns a copy of b in the arena, capped so that appending to it
// cannot reach the bytes of another string.
func (a *arena) copy(b []byte) []byte {
	n := len(b)
	if n == 0 {
		return nil
	}
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]byte, 0, max(n, min(max(2*cap(a.buf), minChunk), a.left)))
	}
	a.left = max(a.left-n, 0)
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// str returns b as a string in the arena.
func (a *arena) str(b []byte) string {
	c := a.copy(b)
	return unsafe.String(unsafe.SliceData(c), len(c))
}

func (r *jsonReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("offset %d: %s", r.i, fmt.Sprintf(format, args...))
	}
	r.i = len(r.b)
}

func (r *jsonReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, or 0 at the end.
func (r *jsonReader) peek() byte {
	r.ws()
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

// null consumes a null and reports whether there was one.
func (r *jsonReader) null() bool {
	if r.peek() == 'n' {
		r.literal("null")
		return true
	}
	return false
}

func (r *jsonReader) literal(lit string) {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		r.fail("invalid literal, want %s", lit)
		return
	}
	r.i += len(lit)
}

// object reads an object (or null), calling member for each key; member
// must read exactly one value.
func (r *jsonReader) object(what string, member func(key []byte)) {
	if r.null() {
		return
	}
	if r.peek() != '{' {
		r.fail("%s: want an object", what)
		return
	}
	if r.depth++; r.depth > maxDepth {
		r.fail("nested too deep")
		return
	}
	r.i++
	if r.peek() == '}' {
		r.i++
		r.depth--
		return
	}
	for r.err == nil {
		if r.peek() != '"' {
			r.fail("%s: want a key", what)
			return
		}
		key := r.stringBytes()
		if r.peek() != ':' {
			r.fail("%s: want ':' after a key", what)
			return
		}
		r.i++
		member(key)
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			r.depth--
			return
		default:
			r.fail("%s: want ',' or '}'", what)
		}
	}
}

// array reads an array (or null), calling elem for each element.
func (r *jsonReader) array(what string, elem func()) {
	if r.null() {
		return
	}
	if r.peek() != '[' {
		r.fail("%s: want an array", what)
		return
	}
	if r.depth++; r.depth > maxDepth {
		r.fail("nested too deep")
		return
	}
	r.i++
	if r.peek() == ']' {
		r.i++
		r.depth--
		return
	}
	for r.err == nil {
		elem()
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			r.depth--
			return
		default:
			r.fail("%s: want ',' or ']'", what)
		}
	}
}

func (r *jsonReader) str(what string) string {
	if r.null() {
		return ""
	}
	if r.peek() != '"' {
		r.fail("%s: want a string", what)
		return ""
	}
	return r.text.str(r.stringBytes())
}

func (r *jsonReader) strs(what string) []string {
	var out []string
	r.array(what, func() { out = append(out, r.str(what)) })
	return out
}

func (r *jsonReader) bool(what string) bool {
	switch r.peek() {
	case 't':
		r.literal("true")
		return true
	case 'f':
		r.literal("false")
	case 'n':
		r.literal("null")
	default:
		r.fail("%s: want true or false", what)
	}
	return false
}

// int reads an integer (or null as 0). A number with a fraction or an
// exponent is not an integer.
func (r *jsonReader) int(what string) int {
	if r.null() {
		return 0
	}
	start := r.i
	r.number()
	if r.err != nil {
		r.err = fmt.Errorf("%s: %w", what, r.err)
		return 0
	}
	text := r.b[start:r.i]
	if n, ok := smallInt(text); ok {
		return n
	}
	n, err := strconv.ParseInt(string(text), 10, 0)
	if err != nil {
		r.i = start
		r.fail("%s: %s is not an integer in range", what, text)
		return 0
	}
	return int(n)
}

// smallInt reads a number of at most 18 digits and an optional minus
// sign, the form of every blob reference and token count, without the
// string ParseInt needs.
func smallInt(text []byte) (int, bool) {
	digits := text
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if len(digits) < len(text) {
		n = -n
	}
	return n, true
}

// ref reads a blob reference: an index, or -1 when null.
func (r *jsonReader) ref(what string) int {
	if r.null() {
		return -1
	}
	n := r.int(what)
	if n < 0 && r.err == nil {
		r.fail("%s: blob reference %d is negative", what, n)
	}
	return n
}

// raw reads any value and returns a copy of its text.
func (r *jsonReader) raw() []byte {
	r.ws()
	start := r.i
	r.skip()
	if r.err != nil {
		return nil
	}
	return r.text.copy(r.b[start:r.i])
}

// skip reads and checks one value of any kind.
func (r *jsonReader) skip() {
	switch c := r.peek(); {
	case c == '{':
		r.object("value", func([]byte) { r.skip() })
	case c == '[':
		r.array("value", r.skip)
	case c == '"':
		r.skipString()
	case c == 't':
		r.literal("true")
	case c == 'f':
		r.literal("false")
	case c == 'n':
		r.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		r.number()
	case c == 0 && r.i == len(r.b):
		r.fail("unexpected end")
	default:
		r.fail("unexpected %q", c)
	}
}

// number reads a JSON number.
func (r *jsonReader) number() {
	b, i := r.b, r.i
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		r.fail("want a number")
		return
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			r.fail("want digits after '.'")
			return
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			r.fail("want digits in the exponent")
			return
		}
	}
	r.i = i
}

// stringBytes reads a string at the opening quote and returns its
// unescaped bytes: a view of the input when nothing needed unescaping,
// else a new slice. Invalid UTF-8 and lone surrogates become U+FFFD.
func (r *jsonReader) stringBytes() []byte {
	r.i++ // the opening quote
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			return s
		case c == '\\' || c >= utf8.RuneSelf:
			return r.unescape(start)
		case c < 0x20:
			r.fail("control character %#x in a string", c)
			return nil
		}
		r.i++
	}
	r.fail("unterminated string")
	return nil
}

// skipString reads a string at the opening quote and checks it as
// stringBytes does, without building its unescaped bytes: the strings of
// tool inputs are only checked, and unescaping them was one allocation
// each.
func (r *jsonReader) skipString() {
	r.i++ // the opening quote
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return
		case c < 0x20:
			r.fail("control character %#x in a string", c)
			return
		case c != '\\':
			r.i++
			continue
		}
		if r.i+1 >= len(r.b) {
			break
		}
		e := r.b[r.i+1]
		r.i += 2
		switch e {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if r.hex4(); r.err != nil {
				return
			}
		default:
			r.i -= 2
			r.fail("invalid escape \\%c", e)
			return
		}
	}
	r.fail("unterminated string")
}

func (r *jsonReader) unescape(start int) []byte {
	out := append([]byte(nil), r.b[start:r.i]...)
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return out
		case c < 0x20:
			r.fail("control character %#x in a string", c)
			return nil
		case c >= utf8.RuneSelf:
			ru, size := utf8.DecodeRune(r.b[r.i:])
			if ru == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, r.b[r.i:r.i+size]...)
			}
			r.i += size
		case c != '\\':
			out = append(out, c)
			r.i++
		default:
			if r.i+1 >= len(r.b) {
				r.fail("unterminated string")
				return nil
			}
			e := r.b[r.i+1]
			r.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				ru := r.hex4()
				if r.err != nil {
					return nil
				}
				if utf16.IsSurrogate(ru) {
					lo := rune(-1)
					if r.i+1 < len(r.b) && r.b[r.i] == '\\' && r.b[r.i+1] == 'u' {
						save := r.i
						r.i += 2
						lo = r.hex4()
						if r.err != nil {
							return nil
						}
						if utf16.DecodeRune(ru, lo) == utf8.RuneError {
							r.i = save // not a pair: the second escape stands alone
							lo = -1
						}
					}
					ru = utf16.DecodeRune(ru, lo)
				}
				out = utf8.AppendRune(out, ru)
			default:
				r.i -= 2
				r.fail("invalid escape \\%c", e)
				return nil
			}
		}
	}
	r.fail("unterminated string")
	return nil
}

func (r *jsonReader) hex4() rune {
	if len(r.b)-r.i < 4 {
		r.fail("short \\u escape")
		return 0
	}
	var v rune
	for _, c := range r.b[r.i : r.i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			r.fail("invalid \\u escape")
			return 0
		}
	}
	r.i += 4
	return v
}
