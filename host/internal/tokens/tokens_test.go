package tokens

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/compact-host/compact-host/abi"
)

func TestCounters(t *testing.T) {
	if n := Chars().Count("abcdefgh"); n != 2 {
		t.Errorf("chars/4 of 8 chars = %d", n)
	}
	if n := Chars().Count("héllo"); n != 2 {
		t.Errorf("chars/4 counts runes, not bytes: got %d", n)
	}
	o := ForModel("gpt-4o-mini")
	if o.Name() != ModeO200k {
		t.Fatalf("gpt-4o-mini uses %s", o.Name())
	}
	// "hello world" is two tokens in o200k and cl100k.
	if n := o.Count("hello world"); n != 2 {
		t.Errorf("o200k(hello world) = %d", n)
	}
	// Special tokens are text to the counter, as in tiktoken's encode_ordinary.
	if n := o.Count("<|endoftext|>"); n < 3 {
		t.Errorf("o200k(<|endoftext|>) = %d, want the tokens of its text", n)
	}
	if c := ForModel("openai/gpt-4-turbo"); c.Name() != ModeCl100k {
		t.Errorf("gpt-4-turbo uses %s", c.Name())
	}
	if c := ForModel("claude-sonnet-4-5"); c.Name() != "chars/4" {
		t.Errorf("claude uses %s", c.Name())
	}
	if _, err := New("bogus", ""); err == nil {
		t.Error("unknown mode accepted")
	}
}

func TestMessageEstimate(t *testing.T) {
	m := abi.Message{Role: abi.RoleAssistant, Content: []abi.Block{
		{Type: abi.BlockText, Text: "12345678"},
		{Type: abi.BlockToolUse, Name: "Read", Input: json.RawMessage(`{"a":1}`)},
		{Type: abi.BlockImage},
	}}
	want := perMessage + 2 + perToolUse + 1 + 2 + perImage
	if got := Message(Chars(), &m); got != want {
		t.Errorf("Message = %d, want %d", got, want)
	}
}

func TestCalibration(t *testing.T) {
	var c Calibration
	if c.Factor() != 1 || c.Apply(100) != 100 {
		t.Fatal("zero value is not identity")
	}
	c.Observe(1000, 1300)
	if math.Abs(c.Factor()-1.3) > 1e-9 || c.Offset() != 0 || c.Apply(1000) != 1300 {
		t.Errorf("a plausible first ratio sets the factor: %v offset %d", c.Factor(), c.Offset())
	}
	// A step of a fifth of the context or more measures a slope, which the
	// factor follows by EMA; the offset follows the residual by EMA.
	c.Observe(2000, 3100) // slope 1.8
	wantF := 0.8*1.3 + 0.2*1.8
	if math.Abs(c.Factor()-wantF) > 1e-9 {
		t.Errorf("EMA: got %v want %v", c.Factor(), wantF)
	}
	if want := 0.2 * (3100 - wantF*2000); math.Abs(float64(c.Offset())-want) > 1 {
		t.Errorf("offset %d, want %.0f", c.Offset(), want)
	}
	// A step too small to measure leaves the factor alone.
	f := c.Factor()
	c.Observe(2050, 3200)
	if c.Factor() != f {
		t.Errorf("small step moved the factor: %v", c.Factor())
	}
	for range 60 {
		c.Observe(c.lastEst*2, c.lastRep*2+c.lastEst*10)
	}
	if c.Factor() > CalibrationMax || c.Factor() < 2.99 {
		t.Errorf("factor not held at the clamp: %v", c.Factor())
	}
	var d Calibration
	d.Observe(1000, 400)
	if d.Factor() != CalibrationMin {
		t.Errorf("factor not clamped low: %v", d.Factor())
	}
	d.Observe(0, 5)
	d.Observe(5, 0)
	if d.Samples() != 1 {
		t.Errorf("empty reports must be ignored")
	}
}

// One odd report (a provider counting something twice, a replay's
// artifact) moves the estimate a fifth of the way, not all of it.
func TestCalibrationResistsOneOutlier(t *testing.T) {
	var c Calibration
	for i := 0; i < 5; i++ {
		c.Observe(100000+i*1000, 110000+i*1100)
	}
	before := c.Apply(106000)
	c.Observe(106000, 220000) // twice the truth
	after := c.Apply(106000)
	if jump := float64(after-before) / float64(before); jump > 0.25 {
		t.Fatalf("one outlier moved the estimate by %.0f%%", 100*jump)
	}
	for i := 0; i < 15; i++ {
		c.Observe(107000+i*1000, (107000+i*1000)*11/10)
	}
	if got, want := c.Apply(125000), 137500; math.Abs(float64(got-want))/float64(want) > 0.02 {
		t.Errorf("did not recover from the outlier: %d, want %d", got, want)
	}
}

// A fixed prompt the estimate never sees (a 42,000-token system prompt)
// is learnt as an offset, so estimates stay right when a compaction
// shrinks the context.
func TestCalibrationLearnsFixedOverhead(t *testing.T) {
	truth := func(est int) int { return est*11/10 + 42000 }
	var c Calibration
	est := 5000
	for i := 0; i < 3; i++ {
		c.Observe(est, truth(est))
		est += 3000
	}
	for _, e := range []int{est, 3000, 60000} {
		got, want := c.Apply(e), truth(e)
		if diff := math.Abs(float64(got-want)) / float64(want); diff > 0.05 {
			t.Errorf("after 3 reports, estimate %d: got %d want %d (%.1f%% off)", e, got, want, 100*diff)
		}
	}
	if c.Offset() < 40000 || c.Factor() > 1.2 {
		t.Errorf("factor %v offset %d: the overhead was read as a ratio", c.Factor(), c.Offset())
	}
}

func BenchmarkO200k(b *testing.B) {
	text := ""
	for range 1000 {
		text += "func main() { fmt.Println(\"hello, world\") } // comment\n"
	}
	c := ForModel("gpt-4o")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		c.Count(text)
	}
}

func TestRuneCountMatchesUTF8(t *testing.T) {
	for _, s := range []string{"", "a", "abcdefg", "abcdefgh", "abcdefghi", "déjà vu, encore une fois", "日本語のテキストと ASCII text mixed 12345678",
		"bad \xff\xfe bytes in the middle of ascii text", "\xe2\x82 truncated sequence then ascii", "emoji 😀😀😀 and more ascii after it", strings.Repeat("x", 1000) + "é",
		strings.Repeat("─", 40) + " box drawing " + strings.Repeat("━", 33), strings.Repeat("ab─", 20) + "\xe2\x94",
		"1234567\xe2\x94\x80" + strings.Repeat("y", 40) + "\xed\xa0\x80 surrogate", "overlong \xc0\x80 and \xe0\x80\x80 and \xf0\x80\x80\x80 in words",
		"edges \xe0\xa0\x80 \xed\x9f\xbf \xf0\x90\x80\x80 \xf4\x8f\xbf\xbf \xf4\x90\x80\x80 \xf5\x80\x80\x80 past them",
		strings.Repeat("😀", 17) + "\x80", strings.Repeat("z", 31) + "😀" + strings.Repeat("z", 40)} {
		assert.Equal(t, utf8.RuneCountInString(s), runeCount(s), "%q", s)
	}
}

func FuzzRuneCount(f *testing.F) {
	f.Add("déjà vu \xff abcdefgh")
	f.Add(strings.Repeat("─", 13) + "x" + strings.Repeat("─", 5) + "┼" + strings.Repeat("─", 4) + "\xe2\x94")
	f.Add("abcdefgh" + strings.Repeat("═", 9) + "\xe2\x95" + strings.Repeat("═", 7) + "\xed\xa0\x80 xyz")
	f.Add("     1→import Foundation\n     2→\n    10→\xe2\x86 x\xe2\x86\x92\x92ab\xe0\xa0\x80abcd\xed\x9f\xbfabcdef→")
	f.Fuzz(func(t *testing.T, s string) { assert.Equal(t, utf8.RuneCountInString(s), runeCount(s)) })
}
