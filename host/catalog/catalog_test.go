package catalog

import "testing"

func TestLookup(t *testing.T) {
	cases := []struct {
		name          string
		provider      string
		context, out  int
		budgetDefault int
	}{
		{"claude-sonnet-4-5", "anthropic", 200000, 64000, 136000},
		{"anthropic/claude-sonnet-4-5", "anthropic", 200000, 64000, 136000},
		{"gpt-4o", "openai", 128000, 16384, 128000 - 16384},
		// gpt-5 states an input limit below context - output.
		{"gpt-5", "openai", 400000, 128000, 272000},
	}
	for _, c := range cases {
		m, ok := Lookup(c.name)
		if !ok {
			t.Fatalf("%s not found", c.name)
		}
		if m.Provider != c.provider || m.ContextWindow != c.context || m.MaxOutput != c.out {
			t.Errorf("%s: got %+v", c.name, m)
		}
		if b := m.InputBudget(0); b != c.budgetDefault {
			t.Errorf("%s: InputBudget(0) = %d, want %d", c.name, b, c.budgetDefault)
		}
	}
	if m, _ := Lookup("gpt-5"); m.InputBudget(8000) != 272000 {
		t.Errorf("input limit must cap the budget")
	}
	if _, ok := Lookup("no-such-model-xyz"); ok {
		t.Error("unknown model found")
	}
	if Len() < 5000 {
		t.Errorf("catalog has %d models", Len())
	}
}

func TestSummaryModel(t *testing.T) {
	for model, want := range map[string]string{
		"claude-opus-4-6":  "claude-haiku-4-5",
		"claude-haiku-4-5": "claude-haiku-4-5", // nothing cheaper: its own
		"gpt-5.5":          "gpt-4.1-mini",
	} {
		m, ok := Lookup(model)
		if !ok {
			t.Fatalf("%s not found", model)
		}
		if got := SummaryModel(m); got != want {
			t.Errorf("SummaryModel(%s) = %s, want %s", model, got, want)
		}
	}
}
