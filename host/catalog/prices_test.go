package catalog

import (
	"errors"
	"testing"
)

func TestPricesFromCatalog(t *testing.T) {
	cases := []struct {
		name string
		want Prices
	}{
		// Anthropic: reads at a tenth, 5-minute writes 1.25x, 1-hour 2x input.
		{"claude-sonnet-4-5", Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite5m: 3.75, CacheWrite1h: 6}},
		{"amazon-bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0", Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite5m: 3.75, CacheWrite1h: 6}},
		// OpenAI caches automatically: a write is billed as plain input.
		{"gpt-5", Prices{Input: 1.25, Output: 10, CacheRead: 0.125, CacheWrite5m: 1.25, CacheWrite1h: 1.25}},
	}
	for _, c := range cases {
		m, ok := Lookup(c.name)
		if !ok {
			t.Fatalf("%s not in the catalog", c.name)
		}
		if got := m.Prices(); got != c.want {
			t.Errorf("%s: Prices() = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestParsePrices(t *testing.T) {
	p, err := ParsePrices("input=3,output=15,cache_read=0.3,cache_write=3.75")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite5m: 3.75, CacheWrite1h: 3.75}); p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	p, err = ParsePrices("output=4, input=1 ,cache_write_1h=2")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Prices{Input: 1, Output: 4, CacheRead: 1, CacheWrite5m: 1, CacheWrite1h: 2}); p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	for _, bad := range []string{"", "input=3", "input=3,output=x", "input=3,output=15,input=4",
		"input=-1,output=1", "input=NaN,output=1", "input=Inf,output=1", "input=3,output=15,cache=1", "input3,output=15"} {
		if _, err := ParsePrices(bad); !errors.Is(err, ErrBadPrices) {
			t.Errorf("ParsePrices(%q) = %v, want ErrBadPrices", bad, err)
		}
	}
}
