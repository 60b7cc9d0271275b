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
	if math.Abs(c.Factor()-1.3) > 1e-9 || c.Offset() != 0 || c.Apply(1000) != 1300 {
		t.Errorf("first sample sets the factor: %v offset %d", c.Factor(), c.Offset())
	}
	// A step of the estimate measures a slope the factor follows by EMA.
	c.Observe(2000, 3100) // slope 1.8
	if want := 0.8*1.3 + 0.2*1.8; math.Abs(c.Factor()-want) > 1e-9 {
		t.Errorf("EMA: got %v want %v", c.Factor(), want)
	}
	if c.Apply(2000) != 3100 {
		t.Errorf("the latest report is not reproduced: %d", c.Apply(2000))
	}
	// A step too small to measure leaves the factor alone.
	f := c.Factor()
	c.Observe(2050, 3200)
	if c.Factor() != f || c.Apply(2050) != 3200 {
		t.Errorf("small step moved the factor: %v", c.Factor())
	}
	for range 50 {
		c.Observe(c.lastEst+1000, c.lastRep+100000)
	}
	if c.Factor() > CalibrationMax || c.Factor() < 2.99 {
		t.Errorf("factor not held at the clamp: %v", c.Factor())
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
