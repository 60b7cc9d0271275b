package tokens

import (
	"encoding/json"
	"math"
	"testing"

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
	if math.Abs(c.Factor()-1.3) > 1e-9 {
		t.Errorf("first sample sets the factor: %v", c.Factor())
	}
	c.Observe(1000, 1800)
	if want := 0.8*1.3 + 0.2*1.8; math.Abs(c.Factor()-want) > 1e-9 {
		t.Errorf("EMA: got %v want %v", c.Factor(), want)
	}
	c.Observe(10, 1000)
	for range 50 {
		c.Observe(10, 1000)
	}
	if c.Factor() != CalibrationMax {
		t.Errorf("factor not clamped: %v", c.Factor())
	}
	var d Calibration
	d.Observe(1000, 1)
	if d.Factor() != CalibrationMin {
		t.Errorf("factor not clamped low: %v", d.Factor())
	}
	d.Observe(0, 5)
	d.Observe(5, 0)
	if d.Samples() != 1 {
		t.Errorf("empty reports must be ignored")
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
