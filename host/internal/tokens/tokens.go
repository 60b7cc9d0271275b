// Package tokens estimates and calibrates token counts.
package tokens

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/tokens/bpe"
)

// Counter counts the tokens of a text.
type Counter interface {
	// Name identifies the method: "chars/4", "o200k" or "cl100k".
	Name() string
	Count(s string) int
}

// Counter names accepted by New.
const (
	ModeAuto   = "auto"
	ModeChars  = "chars"
	ModeO200k  = "o200k"
	ModeCl100k = "cl100k"
)

type charsCounter struct{}

func (charsCounter) Name() string { return "chars/4" }

// Count is a quarter of the characters, rounded up: the rule of thumb for
// English text and code that providers without a public tokenizer quote.
func (charsCounter) Count(s string) int { return (runeCount(s) + 3) / 4 }

// runeCount is utf8.RuneCountInString: the count runs over every text
// appended. ASCII is skipped 32 or 64, then 8 bytes at a time; a word
// holding one three-byte character and ASCII is counted whole; in another
// word with a high bit set, the ASCII bytes before the first such byte
// are counted at once, and runes are decoded from there to the next ASCII
// byte as a range over the string decodes them (a byte that starts no
// valid sequence is a rune of its own).
func runeCount(s string) int {
	const hi = 0x8080808080808080
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	n, j := 0, 0
	for j+8 <= len(b) {
		i := j
		// The test of a block is the same in either byte order, so the
		// words are loaded as they lie, without bounds checks: j+32 and
		// j+64 are within b. Blocks of 64 only after one of 32 passed:
		// text where other characters are dense would test each twice.
		p := unsafe.Pointer(unsafe.SliceData(b))
		for j+32 <= len(b) {
			q := unsafe.Add(p, j)
			if (*(*uint64)(q)|*(*uint64)(unsafe.Add(q, 8))|*(*uint64)(unsafe.Add(q, 16))|*(*uint64)(unsafe.Add(q, 24)))&hi != 0 {
				break
			}
			j += 32
			for j+64 <= len(b) {
				q := unsafe.Add(p, j)
				if (*(*uint64)(q)|*(*uint64)(unsafe.Add(q, 8))|*(*uint64)(unsafe.Add(q, 16))|*(*uint64)(unsafe.Add(q, 24))|
					*(*uint64)(unsafe.Add(q, 32))|*(*uint64)(unsafe.Add(q, 40))|*(*uint64)(unsafe.Add(q, 48))|*(*uint64)(unsafe.Add(q, 56)))&hi != 0 {
					break
				}
				j += 64
			}
		}
		for j+8 <= len(b) {
			w := binary.LittleEndian.Uint64((*[8]byte)(b[j : j+8])[:])
			if w&hi != 0 {
				// A word whose only bytes that are not ASCII make one
				// three-byte character (the → before every line of a file
				// read) is counted here, as six runes (its bytes are
				// counted below, so two come off), and the blocks take
				// over again after it.
				k := uint(bits.TrailingZeros64(w&hi)) &^ 7
				if r := uint32(w>>k) & 0xFFFFFF; k <= 40 && (w&hi)>>(k+24) == 0 &&
					r&0xC0C0F0 == 0x8080E0 && byte(r) != 0xE0 && byte(r) != 0xED {
					n -= 2
					j += 8
					break
				}
				j += int(k >> 3)
				break
			}
			j += 8
		}
		n += j - i
		// Rune by rune to the next ASCII byte.
		for j < len(b) && b[j] >= utf8.RuneSelf {
			n++
			if j+3 <= len(b) {
				// Most of what is not ASCII is three bytes: a lead byte
				// 1110xxxx but E0 and ED (whose second byte has a narrower
				// range), and two continuation bytes.
				q := (*[3]byte)(b[j : j+3])
				if r := uint32(q[0]) | uint32(q[1])<<8 | uint32(q[2])<<16; r&0xC0C0F0 == 0x8080E0 && q[0] != 0xE0 && q[0] != 0xED {
					j += 3
					// A run of the same character (a rule drawn with ─)
					// is compared, not decoded: once it repeats, four at
					// a time as twelve bytes, r's bytes repeated.
					for j+3 <= len(b) {
						q := (*[3]byte)(b[j : j+3])
						if uint32(q[0])|uint32(q[1])<<8|uint32(q[2])<<16 != r {
							break
						}
						j += 3
						n++
						r8, r4 := uint64(r)|uint64(r)<<24|uint64(r)<<48, uint32(r>>16)|r<<8
						for j+12 <= len(b) {
							q := (*[12]byte)(b[j : j+12])
							if binary.LittleEndian.Uint64(q[:8]) != r8 || binary.LittleEndian.Uint32(q[8:]) != r4 {
								break
							}
							j += 12
							n += 4
						}
					}
					continue
				}
			}
			j += runeLen(b[j:])
		}
	}
	for j < len(b) {
		if b[j] < utf8.RuneSelf {
			j++
		} else {
			j += runeLen(b[j:])
		}
		n++
	}
	return n
}

// runeLen is the length of the rune b starts with, as utf8.DecodeRune
// reads it: 1 for ASCII and for a byte that starts no valid sequence.
func runeLen(b []byte) int {
	c := b[0]
	switch {
	case c < 0xC2: // ASCII, a continuation byte, or an overlong start
		return 1
	case c < 0xE0:
		if len(b) >= 2 && b[1]&0xC0 == 0x80 {
			return 2
		}
	case c < 0xF0:
		// E0 needs A0..BF next (no overlong form), ED 80..9F (no surrogate).
		if len(b) >= 3 && b[1]&0xC0 == 0x80 && b[2]&0xC0 == 0x80 && (c != 0xE0 || b[1] >= 0xA0) && (c != 0xED || b[1] < 0xA0) {
			return 3
		}
	case c < 0xF5:
		// F0 needs 90..BF next (no overlong form), F4 80..8F (at most U+10FFFF).
		if len(b) >= 4 && b[1]&0xC0 == 0x80 && b[2]&0xC0 == 0x80 && b[3]&0xC0 == 0x80 && (c != 0xF0 || b[1] >= 0x90) && (c != 0xF4 || b[1] < 0x90) {
			return 4
		}
	}
	return 1
}

// Chars returns the chars/4 estimator.
func Chars() Counter { return charsCounter{} }

// exactCounter counts as OpenAI's tokenizer. Text that is not valid
// UTF-8 is counted too, its bad bytes merged as bytes, as tiktoken-go's
// Count did; special tokens such as <|endoftext|> count as plain text.
type exactCounter struct {
	name string
	enc  *bpe.Encoding
}

func (c exactCounter) Name() string { return c.name }

func (c exactCounter) Count(s string) int { return c.enc.Count(s) }

// The vocabularies load on the first count.
var (
	o200k  = exactCounter{ModeO200k, bpe.O200k()}
	cl100k = exactCounter{ModeCl100k, bpe.Cl100k()}
)

func exact(mode string) Counter {
	if mode == ModeCl100k {
		return cl100k
	}
	return o200k
}

// New returns the counter for mode. ModeAuto picks the model's own
// tokenizer where one is public and chars/4 otherwise.
func New(mode, model string) (Counter, error) {
	switch mode {
	case "", ModeAuto:
		return ForModel(model), nil
	case ModeChars:
		return Chars(), nil
	case ModeO200k, ModeCl100k:
		return exact(mode), nil
	}
	return nil, fmt.Errorf("tokens: unknown tokenizer %q (want auto, chars, o200k or cl100k)", mode)
}

// ForModel returns the exact tokenizer of OpenAI models and chars/4 for the rest.
func ForModel(model string) Counter {
	m := strings.ToLower(model)
	if i := strings.LastIndex(m, "/"); i >= 0 {
		m = m[i+1:]
	}
	for _, p := range []string{"gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss", "codex"} {
		if strings.HasPrefix(m, p) {
			return exact(ModeO200k)
		}
	}
	for _, p := range []string{"gpt-4", "gpt-3.5", "gpt-35"} {
		if strings.HasPrefix(m, p) {
			return exact(ModeCl100k)
		}
	}
	return Chars()
}

// Framing costs that providers add around content, in tokens.
const (
	perMessage    = 4
	perToolUse    = 12
	perToolResult = 6
	// perImage is a typical image's cost: Anthropic bills about
	// width*height/750 tokens, near 1,600 for a 1092x1092 picture.
	perImage = 1600
)

// Message estimates the tokens of one message.
func Message(c Counter, m *abi.Message) int {
	n := perMessage
	for i := range m.Content {
		n += Block(c, &m.Content[i])
	}
	return n
}

// Block estimates the tokens of one content block.
func Block(c Counter, b *abi.Block) int {
	switch b.Type {
	case abi.BlockToolUse:
		// The input is only read; a copy of it would cost more than the count.
		return perToolUse + c.Count(b.Name) + c.Count(unsafe.String(unsafe.SliceData(b.Input), len(b.Input)))
	case abi.BlockToolResult:
		return perToolResult + c.Count(b.Text)
	case abi.BlockImage:
		return perImage
	default:
		return c.Count(b.Text)
	}
}
