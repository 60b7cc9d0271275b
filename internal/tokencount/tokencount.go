// Package tokencount is the one syntax of token counts a user writes: in
// a flag, a config file, an environment variable or an HTTP request. A
// count is digits, optionally grouped by underscores, with an optional
// suffix k (thousands) or m (millions); with a suffix it may have a
// fraction: 16000, 16_000, 16k, 128K, 1m, 1.5m.
package tokencount

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Max is the largest token count a user may give for any setting, in the
// CLI, the config file and the HTTP API alike. The largest context window
// of the model catalog is 20,000,000 tokens (the catalog's 99,999,999 is a
// placeholder of a video model); Max leaves headroom above it.
const Max = 32_000_000

// Syntax says how to write a count, for error messages.
const Syntax = "a token count such as 16000, 16_000, 16k or 1.5m"

// maxLen bounds the text parsed: far above any count up to Max.
const maxLen = 32

// Parse reads a count written in the package's syntax, from 0 to Max.
func Parse(s string) (int, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("%q: want %s", s, Syntax)
	}
	if len(t) > maxLen {
		return 0, fmt.Errorf("%q: want %s", s[:maxLen]+"…", Syntax)
	}
	unit := int64(1)
	switch t[len(t)-1] {
	case 'k', 'K':
		unit, t = 1_000, t[:len(t)-1]
	case 'm', 'M':
		unit, t = 1_000_000, t[:len(t)-1]
	}
	whole, frac, hasFrac := strings.Cut(t, ".")
	if !digits(whole, true) || hasFrac && (unit == 1 || !digits(frac, false)) {
		return 0, fmt.Errorf("%q: want %s", s, Syntax)
	}
	whole = strings.ReplaceAll(whole, "_", "")
	// Digits past the unit's own cannot make a whole count; more than
	// len(Max) digits is over Max either way.
	if len(whole) > 12 || len(frac) > 6 {
		return 0, fmt.Errorf("%q: at most %d tokens", s, Max)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: want %s", s, Syntax)
	}
	n := w * unit
	if frac != "" {
		f, _ := strconv.ParseInt(frac, 10, 64)
		scale := int64(1)
		for range frac {
			scale *= 10
		}
		if f*unit%scale != 0 {
			return 0, fmt.Errorf("%q: not a whole number of tokens", s)
		}
		n += f * unit / scale
	}
	if n > Max {
		return 0, fmt.Errorf("%q: at most %d tokens", s, Max)
	}
	return int(n), nil
}

// digits reports whether s is decimal digits, with single underscores
// between digits when grouped is set.
func digits(s string, grouped bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
		case c == '_' && grouped && i > 0 && i < len(s)-1 && s[i-1] != '_':
		default:
			return false
		}
	}
	return true
}

// Tokens is a count in the package's syntax. It is a flag value (pflag),
// and decodes from a TOML or JSON number or string.
type Tokens int

// Set parses a flag's value.
func (t *Tokens) Set(s string) error {
	n, err := Parse(s)
	if err != nil {
		return err
	}
	*t = Tokens(n)
	return nil
}

// String is the count as digits.
func (t Tokens) String() string { return strconv.Itoa(int(t)) }

// Type names the value in --help.
func (t Tokens) Type() string { return "tokens" }

// UnmarshalText reads a TOML string ("16k").
func (t *Tokens) UnmarshalText(b []byte) error { return t.Set(string(b)) }

// MarshalJSON writes the count as a number.
func (t Tokens) MarshalJSON() ([]byte, error) { return strconv.AppendInt(nil, int64(t), 10), nil }

// UnmarshalJSON reads a JSON number (16000) or string ("16k"). A bad
// value is a *json.UnmarshalTypeError, so the decoder names the field;
// IsTokensType tells a caller the error is of a count.
func (t *Tokens) UnmarshalJSON(b []byte) error {
	fail := func(v string) error {
		return &json.UnmarshalTypeError{Value: v, Type: reflect.TypeFor[Tokens]()}
	}
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fail("string")
		}
		if len(s) > maxLen {
			return fail("string of " + strconv.Itoa(len(s)) + " bytes")
		}
		if err := t.Set(s); err != nil {
			return fail("string " + strconv.Quote(s))
		}
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 || n > Max {
		v := string(b)
		if len(v) > maxLen {
			v = v[:maxLen] + "…"
		}
		return fail("number " + v)
	}
	*t = Tokens(n)
	return nil
}

// IsTokensType reports whether te is the error of a Tokens value, whose
// message should say Syntax rather than "a number".
func IsTokensType(te *json.UnmarshalTypeError) bool {
	return te.Type == reflect.TypeFor[Tokens]()
}
