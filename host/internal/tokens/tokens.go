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

// runeCount is utf8.RuneCountInString, eight bytes at a time: the count
// runs over every tool output appended. In valid UTF-8 the runes are the
// bytes that are not continuation bytes (10xxxxxx); text that is not
// valid UTF-8 is counted rune by rune, as RuneCountInString counts it.
func runeCount(s string) int {
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	n, high := 0, uint64(0)
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		high |= w
		n += 8 - bits.OnesCount64(w&^(w<<1)&0x8080808080808080)
		b = b[8:]
	}
	for _, c := range b {
		high |= uint64(c)
		if c&0xC0 != 0x80 {
			n++
		}
	}
	if high&0x8080808080808080 != 0 && !utf8.ValidString(s) {
		return utf8.RuneCountInString(s)
	}
	return n
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
