// Package jsonscan checks and walks JSON text without decoding it, to read
// a few members of a large value at the speed of memory: tool inputs for
// their file paths, session lines for the members a reader keeps. It
// accepts exactly what encoding/json accepts and decodes strings exactly as
// encoding/json does; where it cannot promise that (deep nesting; with
// Float64 numbers, a number that may not fit a float64) it answers
// Undecided and the caller asks encoding/json.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Status is the outcome of a scan.
type Status int

// Statuses.
const (
	// OK: a valid value.
	OK Status = iota
	// Bad: not JSON; encoding/json rejects it too.
	Bad
	// Undecided: the scanner does not decide; ask encoding/json.
	Undecided
)

// MaxDepth is the nesting a Scanner follows before it answers Undecided.
const MaxDepth = 64

// Scanner checks JSON values. The zero value checks JSON's grammar.
type Scanner struct {
	// Float64 answers Undecided for a number with an exponent or of more
	// than 300 characters: decoded into an interface{} (a float64),
	// encoding/json may refuse it as out of range.
	Float64 bool
	// Checked says the text was checked already (a scan of a value holding
	// it said OK): Members then skips objects, arrays and string values
	// without checking them again (Skip; a string value's flags are
	// Unscanned). Members still reads keys with String.
	Checked bool
}

// SkipWS is the offset of the first byte at or after i that is not JSON
// white space.
func SkipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// What String found in a string.
const (
	Escape        = 1 << iota // a backslash escape
	NonASCII                  // a byte of a multi-byte (or invalid) UTF-8 sequence
	UnicodeEscape             // a \u escape (with Escape): the only escape that can spell a newline or a letter
	Surrogate                 // a \u escape of a UTF-16 surrogate (with UnicodeEscape), paired or not
	// Unscanned: String did not look (a checked Members crosses string
	// values a quote at a time); the string may hold anything above.
	Unscanned
)

// Bit tricks on eight bytes at once (Hacker's Delight 6-1): (x-lsb)&^x&msb
// is non-zero when a byte of x is zero, (x-lsb*n)&^x&msb when one is below
// n <= 128.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special is non-zero when a byte of w is a quote, a backslash or below
// 0x20: the zero tests of w^'"' and w^'\\' and the below-0x20 test of w,
// masked once, since w^'"' and w^'\\' have the high bits of w.
func special(w uint64) uint64 {
	quote, backslash, control := (w^(lsb*'"'))-lsb, (w^(lsb*'\\'))-lsb, w-lsb*0x20
	return (quote | backslash | control) &^ w & msb
}

// plain crosses the bytes from b[j] on, eight at a time, while none ends
// a string, escapes or is a control character, and stops at the first that
// does (the lowest flagged byte is always a real one) or where fewer than
// eight are left. high is the bytes crossed, ORed into the one given:
// their high bits tell bytes that are not ASCII.
func plain(b []byte, j int, high uint64) (int, uint64) {
	for j+8 <= len(b) {
		w := binary.LittleEndian.Uint64((*[8]byte)(b[j : j+8])[:])
		if m := special(w); m != 0 {
			k := uint(bits.TrailingZeros64(m)) &^ 7
			return j + int(k>>3), high | w&(1<<k-1)
		}
		high |= w
		j += 8
	}
	return j, high
}

// String returns the offset past the JSON string starting at b[i] == '"'
// and what it holds (Escape, NonASCII), or flags -1 for an invalid string.
func String(b []byte, i int) (end, flags int) {
	var high uint64
	for j := i + 1; j < len(b); j++ {
		j, high = plain(b, j, high)
		if j >= len(b) {
			break
		}
		c := b[j]
		switch {
		case c == '"':
			if high&msb != 0 {
				flags |= NonASCII
			}
			return j + 1, flags
		case c == '\\':
			flags |= Escape
			j++
			if j >= len(b) {
				return 0, -1
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			default:
				_, n, eflags := escape(b, j-1)
				if n == 0 {
					return 0, -1
				}
				flags |= eflags
				j += n - 2
			}
		case c < 0x20:
			return 0, -1
		case c >= utf8.RuneSelf:
			flags |= NonASCII
		}
	}
	return 0, -1
}

// DecodeString is the value of the JSON string s (quotes included) as
// encoding/json decodes it; false if s is not one valid JSON string.
func DecodeString(s []byte) (string, bool) {
	end, flags := String(s, 0)
	if len(s) == 0 || s[0] != '"' || flags < 0 || end != len(s) {
		return "", false
	}
	return StringValue(s, flags), true
}

// StringAt checks the JSON string at b[i] == '"' as String does and
// decodes it in the same pass: its value, the offset past it and String's
// flags (-1 for an invalid string, with no value). buf is room for the
// value of a string with escapes, grown as needed and returned for the
// next call.
//
// It is String's loop, storing each word it reads once an escape has been
// met. Tool outputs and file contents have an escape every line or so (a
// \n), so decoding after String read them again escape by escape, with a
// call to find each and another to copy the run before it; here the runs
// are copied as they are checked and the value is copied once more, whole,
// into its string.
func StringAt(b []byte, i int, buf []byte) (s string, end, flags int, _ []byte) {
	var high uint64
	j := i + 1
	// Up to the first escape, as String reads: nothing to copy yet.
	for {
		j, high = plain(b, j, high)
		if j >= len(b) {
			return "", 0, -1, buf
		}
		c := b[j]
		if c == '"' {
			if high&msb != 0 {
				flags = NonASCII
			}
			return StringValue(b[i:j+1], flags), j + 1, flags, buf
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", 0, -1, buf
		}
		high |= uint64(c) // a byte that is not ASCII, within the last eight
		j++
	}
	// From the first escape on, copying into buf: the value is never
	// longer than the rest of b, and a word stored whole past what is
	// kept needs eight bytes more.
	if need := len(b) - i + 8; cap(buf) < need {
		buf = make([]byte, need)
	}
	buf = buf[:cap(buf)]
	o := copy(buf, b[i+1:j])
	flags = Escape
	for {
		// b[j] is a backslash.
		if j+1 < len(b) && b[j+1] == 'n' { // the most common escape, a line of a command or a file
			buf[o] = '\n'
			o, j = o+1, j+2
		} else {
			r, n, eflags := escape(b, j)
			if n == 0 {
				return "", 0, -1, buf
			}
			flags |= eflags
			if r < utf8.RuneSelf {
				buf[o] = byte(r)
				o++
			} else {
				o += utf8.EncodeRune(buf[o:], r)
			}
			j += n
		}
		for {
			for j+8 <= len(b) {
				word := (*[8]byte)(b[j : j+8])
				*(*[8]byte)(buf[o : o+8]) = *word
				w := binary.LittleEndian.Uint64(word[:])
				if m := special(w); m != 0 {
					k := uint(bits.TrailingZeros64(m)) &^ 7
					high |= w & (1<<k - 1)
					j, o = j+int(k>>3), o+int(k>>3)
					break
				}
				high |= w
				j, o = j+8, o+8
			}
			if j >= len(b) {
				return "", 0, -1, buf
			}
			c := b[j]
			if c == '"' {
				if high&msb != 0 {
					flags |= NonASCII
					if !utf8.Valid(buf[:o]) {
						// Bytes that are not UTF-8 are read as U+FFFD each.
						return string(appendUnquote(nil, b[i+1:j], false)), j + 1, flags, buf
					}
				}
				return string(buf[:o]), j + 1, flags, buf
			}
			if c == '\\' {
				break
			}
			if c < 0x20 {
				return "", 0, -1, buf
			}
			buf[o] = c
			high |= uint64(c)
			o, j = o+1, j+1
		}
	}
}

// StringValue decodes the valid JSON string s (quotes included), in which
// String found flags.
func StringValue(s []byte, flags int) string {
	if flags == 0 || flags == NonASCII && utf8.Valid(s) {
		return string(s[1 : len(s)-1])
	}
	var out []byte
	if body := s[1 : len(s)-1]; flags == Unscanned {
		valid := utf8.Valid(body)
		if valid && bytes.IndexByte(body, '\\') < 0 {
			return string(body)
		}
		out = appendUnquote(make([]byte, 0, len(body)), body, valid)
	} else {
		out = AppendBodyValue(make([]byte, 0, len(body)), body, flags)
	}
	return unsafe.String(unsafe.SliceData(out), len(out)) // out is not kept
}

// AppendStringValue appends the value of the valid JSON string s (quotes
// included), in which String found flags, to dst.
func AppendStringValue(dst, s []byte, flags int) []byte {
	return AppendBodyValue(dst, s[1:len(s)-1], flags)
}

// AppendBodyValue appends the value of the body of a valid JSON string
// (quotes excluded), or of a part of it cut where no escape is split, in
// which String found flags.
func AppendBodyValue(dst, part []byte, flags int) []byte {
	if flags == Unscanned {
		valid := utf8.Valid(part)
		if valid && bytes.IndexByte(part, '\\') < 0 {
			return append(dst, part...)
		}
		return appendUnquote(dst, part, valid)
	}
	if flags == 0 || flags == NonASCII && utf8.Valid(part) {
		return append(dst, part...)
	}
	return appendUnquote(dst, part, flags&NonASCII == 0)
}

// appendUnquote appends the body of a valid JSON string decoded as
// encoding/json decodes it: escapes resolved, an unpaired surrogate escape
// and each byte of invalid UTF-8 read as U+FFFD. ascii says s is ASCII or
// valid UTF-8, so runs between escapes are copied as they are.
func appendUnquote(out, s []byte, ascii bool) []byte {
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			// Up to the next escape at once, as it is when it is ASCII or
			// valid UTF-8 (no sequence holds a backslash, so none is cut).
			j := bytes.IndexByte(s[i:], '\\')
			if j < 0 {
				j = len(s) - i
			}
			if run := s[i : i+j]; ascii || utf8.Valid(run) {
				out = append(out, run...)
			} else {
				for k := 0; k < len(run); {
					r, size := utf8.DecodeRune(run[k:])
					out = utf8.AppendRune(out, r)
					k += size
				}
			}
			i += j
			continue
		}
		if s[i+1] == 'n' { // the most common escape, a line of a command or a file
			out = append(out, '\n')
			i += 2
			continue
		}
		r, n, _ := escape(s, i)
		if r < utf8.RuneSelf {
			out = append(out, byte(r))
		} else {
			out = utf8.AppendRune(out, r)
		}
		i += n
	}
	return out
}

// escape reads the escape at b[j] == '\\': its value, its length and
// String's flags for it; n is 0 for an escape that is not valid. A \u
// escape of a surrogate takes the escape after it when the two make a
// pair (n is 12), and is U+FFFD when they do not, as encoding/json reads
// it.
func escape(b []byte, j int) (r rune, n, flags int) {
	if j+1 >= len(b) {
		return 0, 0, 0
	}
	switch c := b[j+1]; c {
	case '"', '\\', '/':
		return rune(c), 2, Escape
	case 'b':
		return '\b', 2, Escape
	case 'f':
		return '\f', 2, Escape
	case 'n':
		return '\n', 2, Escape
	case 'r':
		return '\r', 2, Escape
	case 't':
		return '\t', 2, Escape
	case 'u':
		h := Hex4(b[j+2:])
		if h < 0 {
			return 0, 0, 0
		}
		if !utf16.IsSurrogate(rune(h)) {
			return rune(h), 6, Escape | UnicodeEscape
		}
		if j+12 <= len(b) && b[j+6] == '\\' && b[j+7] == 'u' {
			if d := utf16.DecodeRune(rune(h), rune(Hex4(b[j+8:]))); d != utf8.RuneError {
				return d, 12, Escape | UnicodeEscape | Surrogate
			}
		}
		return utf8.RuneError, 6, Escape | UnicodeEscape | Surrogate
	}
	return 0, 0, 0
}

// Hex4 is the value of the four hex digits b starts with, or -1.
func Hex4(b []byte) int {
	if len(b) < 4 {
		return -1
	}
	v := 0
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | int(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | int(c-'a'+10)
		case 'A' <= c && c <= 'F':
			v = v<<4 | int(c-'A'+10)
		default:
			return -1
		}
	}
	return v
}

// Valid reports whether b is one JSON value with only white space around
// it, as json.Valid does, or Undecided.
func (sc Scanner) Valid(b []byte) Status {
	i := SkipWS(b, 0)
	end, st := sc.Value(b, i)
	if st != OK {
		return st
	}
	if SkipWS(b, end) != len(b) {
		return Bad
	}
	return OK
}

// Value returns the offset past the JSON value at b[i] and whether it is
// valid.
func (sc Scanner) Value(b []byte, i int) (int, Status) {
	end, _, st := sc.value(b, i, 1)
	return end, st
}

// ValueFlags is Value, also returning what String found in the strings of
// the value (keys included), ORed.
func (sc Scanner) ValueFlags(b []byte, i int) (end, flags int, st Status) {
	return sc.value(b, i, 1)
}

func (sc Scanner) value(b []byte, i, depth int) (end, flags int, st Status) {
	if i >= len(b) {
		return 0, 0, Bad
	}
	switch c := b[i]; {
	case c == '"':
		end, flags := String(b, i)
		if flags < 0 {
			return 0, 0, Bad
		}
		return end, flags, OK
	case c == '{' || c == '[':
		if depth > MaxDepth {
			return 0, 0, Undecided
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		i = SkipWS(b, i+1)
		if i < len(b) && b[i] == closing {
			return i + 1, 0, OK
		}
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return 0, 0, Bad
				}
				end, kflags := String(b, i)
				if kflags < 0 {
					return 0, 0, Bad
				}
				flags |= kflags
				i = SkipWS(b, end)
				if i >= len(b) || b[i] != ':' {
					return 0, 0, Bad
				}
				i = SkipWS(b, i+1)
			}
			end, vflags, st := sc.value(b, i, depth+1)
			if st != OK {
				return 0, 0, st
			}
			flags |= vflags
			i = SkipWS(b, end)
			if i >= len(b) {
				return 0, 0, Bad
			}
			if b[i] == closing {
				return i + 1, flags, OK
			}
			if b[i] != ',' {
				return 0, 0, Bad
			}
			i = SkipWS(b, i+1)
		}
	}
	switch b[i] {
	case 't':
		end, st = literal(b, i, "true")
	case 'f':
		end, st = literal(b, i, "false")
	case 'n':
		end, st = literal(b, i, "null")
	default:
		end, st = sc.number(b, i)
	}
	return end, 0, st
}

func literal(b []byte, i int, lit string) (int, Status) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, Bad
	}
	return i + len(lit), OK
}

// number checks JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (sc Scanner) number(b []byte, i int) (int, Status) {
	start := i
	digits := func(i int) (int, bool) {
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j, j > i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return 0, Bad
	}
	if b[i] == '0' {
		i++
	} else {
		j, ok := digits(i)
		if !ok {
			return 0, Bad
		}
		i = j
	}
	if i < len(b) && b[i] == '.' {
		j, ok := digits(i + 1)
		if !ok {
			return 0, Bad
		}
		i = j
	}
	exp := false
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j, ok := digits(i)
		if !ok {
			return 0, Bad
		}
		i, exp = j, true
	}
	if sc.Float64 && (exp || i-start > 300) {
		return 0, Undecided
	}
	return i, OK
}

// Member is one member of a JSON object: the key as written (quotes
// excluded) and what String found in it, the value's span and, for a
// string value, what String found in it.
type Member struct {
	Key        []byte
	KeyFlags   int
	Start, End int // the value is b[Start:End]
	ValFlags   int
}

// Members checks that b is one JSON object (white space around it
// allowed) and appends its members to out, in order, in one pass. On Bad
// or Undecided, out holds what was read before.
func (sc Scanner) Members(b []byte, out []Member) ([]Member, Status) {
	i := SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		if i < len(b) {
			if _, st := sc.Value(b, i); st == Undecided {
				return out, Undecided
			}
		}
		return out, Bad
	}
	i = SkipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return out, tail(b, i+1)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return out, Bad
		}
		kend, kflags := String(b, i)
		if kflags < 0 {
			return out, Bad
		}
		j := SkipWS(b, kend)
		if j >= len(b) || b[j] != ':' {
			return out, Bad
		}
		j = SkipWS(b, j+1)
		m := Member{Key: b[i+1 : kend-1], KeyFlags: kflags, Start: j}
		var st Status
		if j < len(b) && b[j] == '"' && sc.Checked {
			m.End, m.ValFlags = skipString(b, j), Unscanned
		} else if j < len(b) && b[j] == '"' {
			if m.End, m.ValFlags = String(b, j); m.ValFlags < 0 {
				st = Bad
			}
		} else if sc.Checked {
			m.End = Skip(b, j)
		} else {
			m.End, _, st = sc.value(b, j, 2)
		}
		if st != OK {
			return out, st
		}
		out = append(out, m)
		i = SkipWS(b, m.End)
		if i >= len(b) {
			return out, Bad
		}
		if b[i] == '}' {
			return out, tail(b, i+1)
		}
		if b[i] != ',' {
			return out, Bad
		}
		i = SkipWS(b, i+1)
	}
}

// tail is OK when only white space follows offset i.
func tail(b []byte, i int) Status {
	if SkipWS(b, i) != len(b) {
		return Bad
	}
	return OK
}

// Skip returns the offset past the value at b[i] in checked JSON text (a
// scan said OK), looking only for the bytes that end strings and
// containers: strings are crossed a quote at a time with
// bytes.IndexByte. On text that is not valid JSON its answer means
// nothing.
func Skip(b []byte, i int) int {
	if i < len(b) && b[i] != '"' && b[i] != '{' && b[i] != '[' {
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i // the end of a number or literal
			}
		}
		return i
	}
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i = skipString(b, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return i
}

// skipString returns the offset past the checked JSON string at b[i]: the
// first quote not escaped by an odd run of backslashes.
func skipString(b []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		j += k
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j
		}
	}
}
