package tokencount

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int{
		"0": 0, "16000": 16000, "16_000": 16000, "1_000_000": 1_000_000, "16k": 16000, "16K": 16000,
		"128k": 128_000, "1m": 1_000_000, "1M": 1_000_000, "1.5m": 1_500_000, "0.5k": 500, " 32k ": 32000,
		"32_000_000": Max, "32m": Max, "200k": 200_000, "007": 7,
	} {
		got, err := Parse(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for in, msg := range map[string]string{
		"": "want a token count", "k": "want a token count", "-5": "want a token count", "16q": "want a token count",
		"1.5": "want a token count", "16__000": "want a token count", "_16": "want a token count", "16_": "want a token count",
		"16_k": "want a token count", "1.k": "want a token count", "1.2.3k": "want a token count", "0x10": "want a token count",
		"1e6": "want a token count", "+5": "want a token count", "1.0001k": "not a whole number", "33m": "at most 32000000",
		"32_000_001": "at most", "99999999999999999999": "at most", "9223372036854775807": "at most",
		strings.Repeat("9", 100): "want a token count", "16 000": "want a token count", "١٦": "want a token count",
	} {
		_, err := Parse(in)
		if assert.Error(t, err, in) {
			assert.Contains(t, err.Error(), msg, in)
		}
	}
}

// A count decodes the same from a flag, a TOML file and a JSON body,
// as a number or as text.
func TestTokensDecoders(t *testing.T) {
	var cfg struct {
		A Tokens `toml:"a"`
		B Tokens `toml:"b"`
	}
	require.NoError(t, toml.Unmarshal([]byte("a = 16000\nb = \"16k\"\n"), &cfg))
	assert.Equal(t, Tokens(16000), cfg.A)
	assert.Equal(t, Tokens(16000), cfg.B)
	require.ErrorContains(t, toml.Unmarshal([]byte("a = \"16q\"\n"), &cfg), "want a token count")

	var body struct {
		Options struct {
			Window Tokens `json:"context_window"`
		} `json:"options"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"options":{"context_window":"1.5m"}}`), &body))
	assert.Equal(t, Tokens(1_500_000), body.Options.Window)
	require.NoError(t, json.Unmarshal([]byte(`{"options":{"context_window":32000}}`), &body))
	assert.Equal(t, Tokens(32000), body.Options.Window)
	for _, bad := range []string{`"16q"`, `-1`, `1.5`, `33000000`, `true`, `"` + strings.Repeat("1", 40) + `"`} {
		err := json.Unmarshal([]byte(`{"options":{"context_window":`+bad+`}}`), &body)
		var te *json.UnmarshalTypeError
		require.ErrorAs(t, err, &te, bad)
		assert.True(t, IsTokensType(te), bad)
		assert.Equal(t, "options.context_window", te.Field, bad)
	}

	var f Tokens
	require.NoError(t, f.Set("16k"))
	assert.Equal(t, "16000", f.String())
	assert.Error(t, f.Set("16 k"))
	b, err := json.Marshal(Tokens(42))
	require.NoError(t, err)
	assert.Equal(t, "42", string(b))
}

// Whatever the text, Parse returns a count in range or an error, and a
// count it prints as digits parses back to itself, in every form.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"16k", "1.5m", "16_000", "0", "32m", "1.0001k", "-1", "9999999999999k", "_", "1__0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			return
		}
		if n < 0 || n > Max {
			t.Fatalf("Parse(%q) = %d, out of range", s, n)
		}
		for _, form := range []string{strconv.Itoa(n), group(n)} {
			m, err := Parse(form)
			if err != nil || m != n {
				t.Fatalf("Parse(%q) = %d, %v; want %d (from %q)", form, m, err, n, s)
			}
		}
		if n%1000 == 0 {
			if m, err := Parse(strconv.Itoa(n/1000) + "k"); err != nil || m != n {
				t.Fatalf("Parse(%dk) = %d, %v", n/1000, m, err)
			}
		}
	})
}

// group writes n with underscores every three digits.
func group(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "_" + s[i:]
	}
	return s
}
