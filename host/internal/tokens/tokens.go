// Package tokens estimates and calibrates token counts.
package tokens

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/compact-host/compact-host/abi"
	"github.com/tiktoken-go/tokenizer"
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
// appended. ASCII is skipped 32 bytes at a time (four words with no high
// bit set). Elsewhere, eight bytes at a time, the runes of valid UTF-8 are
// the bytes that are not continuation bytes (10xxxxxx), and a table-driven
// automaton (utf8States) checks that the bytes are valid UTF-8 in the same
// pass. Text that is not is counted again rune by rune, as
// RuneCountInString counts it.
func runeCount(s string) int {
	const (
		lsb = 0x0101010101010101
		hi  = 0x8080808080808080
	)
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	n, j := 0, 0
	state := uint64(utf8Accept)
	for j+8 <= len(b) {
		i := j
		for j+32 <= len(b) {
			q := (*[32]byte)(b[j : j+32])
			if (binary.LittleEndian.Uint64(q[0:])|binary.LittleEndian.Uint64(q[8:])|
				binary.LittleEndian.Uint64(q[16:])|binary.LittleEndian.Uint64(q[24:]))&hi != 0 {
				break
			}
			j += 32
		}
		for j+8 <= len(b) && binary.LittleEndian.Uint64((*[8]byte)(b[j : j+8])[:])&hi == 0 {
			j += 8
		}
		n += j - i
		// Words with a high bit set, and those that end a rune begun
		// before them.
		for j+8 <= len(b) {
			q := (*[8]byte)(b[j : j+8])
			w := binary.LittleEndian.Uint64(q[:])
			if w&hi == 0 && state == utf8Accept {
				break
			}
			cont := w &^ (w << 1) & hi      // 0x80 in each continuation byte
			n += 8 - int((cont>>7)*lsb>>56) // their count: the sum of the bytes of cont>>7
			// Unrolled; only the low six bits of state count.
			state = utf8States[q[0]] >> (state & 63)
			state = utf8States[q[1]] >> (state & 63)
			state = utf8States[q[2]] >> (state & 63)
			state = utf8States[q[3]] >> (state & 63)
			state = utf8States[q[4]] >> (state & 63)
			state = utf8States[q[5]] >> (state & 63)
			state = utf8States[q[6]] >> (state & 63)
			state = utf8States[q[7]] >> (state & 63) & 63
			j += 8
		}
	}
	for _, c := range b[j:] {
		if c&0xC0 != 0x80 {
			n++
		}
		state = utf8States[c] >> (state & 63) & 63
	}
	if state != utf8Accept {
		return utf8.RuneCountInString(s)
	}
	return n
}

// The states of a UTF-8 checker, each a shift: utf8States[c] >> state & 63
// is the state after byte c.
const (
	utf8Accept = 6 * iota // between runes
	utf8Error             // not UTF-8; stays so
	utf8Tail1             // one continuation byte to go
	utf8Tail2
	utf8Tail3
	utf8AfterE0 // A0..BF, then one more: no overlong form
	utf8AfterED // 80..9F, then one more: no surrogate
	utf8AfterF0 // 90..BF, then two more: no overlong form
	utf8AfterF4 // 80..8F, then two more: at most U+10FFFF
)

// utf8States holds, for each byte, the next state from every state, each
// at its state's shift (Per Vognsen's shift-based automaton): one shift a
// byte, with no branch.
var utf8States = func() (t [256]uint64) {
	in := func(c, lo, hi int) bool { return lo <= c && c <= hi }
	for c := range 256 {
		next := func(from, to int) { t[c] |= uint64(to) << from }
		switch {
		case c < 0x80:
			next(utf8Accept, utf8Accept)
		case in(c, 0xC2, 0xDF):
			next(utf8Accept, utf8Tail1)
		case c == 0xE0:
			next(utf8Accept, utf8AfterE0)
		case c == 0xED:
			next(utf8Accept, utf8AfterED)
		case in(c, 0xE1, 0xEF):
			next(utf8Accept, utf8Tail2)
		case c == 0xF0:
			next(utf8Accept, utf8AfterF0)
		case c == 0xF4:
			next(utf8Accept, utf8AfterF4)
		case in(c, 0xF1, 0xF3):
			next(utf8Accept, utf8Tail3)
		default:
			next(utf8Accept, utf8Error)
		}
		next(utf8Error, utf8Error)
		cont := func(to int) int {
			if in(c, 0x80, 0xBF) {
				return to
			}
			return utf8Error
		}
		next(utf8Tail1, cont(utf8Accept))
		next(utf8Tail2, cont(utf8Tail1))
		next(utf8Tail3, cont(utf8Tail2))
		ranged := func(lo, hi, to int) int {
			if in(c, lo, hi) {
				return to
			}
			return utf8Error
		}
		next(utf8AfterE0, ranged(0xA0, 0xBF, utf8Tail1))
		next(utf8AfterED, ranged(0x80, 0x9F, utf8Tail1))
		next(utf8AfterF0, ranged(0x90, 0xBF, utf8Tail2))
		next(utf8AfterF4, ranged(0x80, 0x8F, utf8Tail2))
	}
	return t
}()

// Chars returns the chars/4 estimator.
func Chars() Counter { return charsCounter{} }

type exactCounter struct {
	name  string
	codec tokenizer.Codec
}

func (c exactCounter) Name() string { return c.name }

func (c exactCounter) Count(s string) int {
	n, err := c.codec.Count(s)
	if err != nil {
		// Invalid UTF-8 is the only failure; fall back rather than lose the count.
		return charsCounter{}.Count(s)
	}
	return n
}

var (
	codecMu sync.Mutex
	codecs  = map[string]Counter{}
)

func exact(mode string) Counter {
	codecMu.Lock()
	defer codecMu.Unlock()
	if c, ok := codecs[mode]; ok {
		return c
	}
	enc := tokenizer.O200kBase
	if mode == ModeCl100k {
		enc = tokenizer.Cl100kBase
	}
	codec, err := tokenizer.Get(enc)
	if err != nil {
		panic(err) // both encodings are compiled in
	}
	c := exactCounter{name: mode, codec: codec}
	codecs[mode] = c
	return c
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
