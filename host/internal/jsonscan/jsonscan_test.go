package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var seeds = []string{
	``, ` `, `null`, `nul`, `true`, `false`, `0`, `-0`, `01`, `-`, `1.`, `1.5e`, `1e400`, `-12.5E+3`, `"s"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`,
	`"\ud800\u0041"`, `"\x"`, "\"tab\tinside\"", "\"bad \xff\xfe\"", `[]`, `[1,]`, `[1 2]`, `{}`, `{"a":1,}`, `{"a" 1}`, `{"a":1}}`, `{"a":[{"b":null}]} `,
	`{"a":"b","a":"c"}`, `{"k\u0065y":1}`, "{\"k\xffy\":1}", `{"a":1} x`, strings.Repeat(`[`, 70) + strings.Repeat(`]`, 70),
	`{"text":"` + strings.Repeat(`abcdefgh`, 20) + `\n` + strings.Repeat(`déjà vu `, 10) + `"}`,
}

func FuzzValid(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st := Scanner{}.Valid(b)
		if st == Undecided {
			return
		}
		assert.Equal(t, json.Valid(b), st == OK, "%q", b)
		if st == OK {
			// Bytes that are not ASCII can only be in strings.
			_, flags, _ := Scanner{}.ValueFlags(b, SkipWS(b, 0))
			assert.Equal(t, bytes.IndexFunc(b, func(r rune) bool { return r >= 0x80 }) >= 0, flags&NonASCII != 0, "%q", b)
		}
		if (Scanner{Float64: true}).Valid(b) == OK {
			var v any
			require.NoError(t, json.Unmarshal(b, &v))
		}
	})
}

func FuzzDecodeString(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, "\"bad \xff\xfe\"", "\"cut \xe2\x82\"", `"déjà"`, `"` + strings.Repeat("x", 40) + `\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		var want string
		werr := json.Unmarshal(s, &want)
		got, ok := DecodeString(s)
		if !ok {
			if werr == nil {
				// Unmarshal also takes white space around the string.
				trimmed := bytes.Trim(s, " \t\r\n")
				require.NotEqual(t, len(s), len(trimmed), "a valid string refused: %q", s)
				got, ok = DecodeString(trimmed)
				assert.True(t, ok, "a valid string refused: %q", trimmed)
				assert.Equal(t, want, got, "%q", s)
			}
			return
		}
		require.NoError(t, werr, "the scanner accepted %q", s)
		assert.Equal(t, want, got, "%q", s)
	})
}

func FuzzMembers(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, st := Scanner{}.Members(b, nil)
		if st == Undecided {
			return
		}
		var want map[string]json.RawMessage
		werr := json.Unmarshal(b, &want)
		if st == Bad {
			assert.False(t, werr == nil && want != nil, "a valid object refused: %q", b)
			return
		}
		require.NoError(t, werr, "the scanner accepted %q", b)
		got := map[string]json.RawMessage{}
		for _, m := range ms {
			var key string
			require.NoError(t, json.Unmarshal(append(append([]byte{'"'}, m.Key...), '"'), &key))
			got[key] = json.RawMessage(b[m.Start:m.End])
			if b[m.Start] == '"' {
				var s string
				require.NoError(t, json.Unmarshal(b[m.Start:m.End], &s))
				assert.Equal(t, s, StringValue(b[m.Start:m.End], m.ValFlags))
			}
		}
		assert.Equal(t, want, got, "%q", b)
		checked, st := Scanner{Checked: true}.Members(b, nil)
		assert.Equal(t, OK, st)
		require.Len(t, checked, len(ms), "checked text, %q", b)
		for k, m := range checked {
			// String values are crossed unscanned; they decode the same.
			if b[m.Start] == '"' {
				assert.Equal(t, Unscanned, m.ValFlags, "%q", b)
				assert.Equal(t, StringValue(b[m.Start:m.End], ms[k].ValFlags), StringValue(b[m.Start:m.End], m.ValFlags), "%q", b)
				assert.Equal(t, AppendBodyValue(nil, b[m.Start+1:m.End-1], ms[k].ValFlags), AppendBodyValue(nil, b[m.Start+1:m.End-1], m.ValFlags), "%q", b)
				m.ValFlags = ms[k].ValFlags
			}
			assert.Equal(t, ms[k], m, "checked text, %q", b)
		}
	})
}

// FuzzSkip holds Skip to Value on every value of valid text.
func FuzzSkip(f *testing.F) {
	for _, s := range append(seeds, `[1,"a\\",{"b":"\"}"},[true,null],-2.5e3]`, `{"a":"\\\"","b":[{}]}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if (Scanner{}).Valid(b) != OK {
			return
		}
		i := SkipWS(b, 0)
		end, _ := Scanner{}.Value(b, i)
		assert.Equal(t, end, Skip(b, i), "%q", b)
		if b[i] == '[' || b[i] == '{' {
			// Each element or member value, as Skip meets them.
			for j := SkipWS(b, i+1); j < end-1; {
				if b[i] == '{' {
					k, _ := String(b, j)
					j = SkipWS(b, SkipWS(b, k)+1)
				}
				e, _ := Scanner{}.Value(b, j)
				assert.Equal(t, e, Skip(b, j), "%q at %d", b, j)
				j = SkipWS(b, e)
				if b[j] == ',' {
					j = SkipWS(b, j+1)
				} else {
					break
				}
			}
		}
	})
}

func TestSeeds(t *testing.T) {
	for _, s := range seeds {
		want := json.Valid([]byte(s))
		st := Scanner{}.Valid([]byte(s))
		if st != Undecided {
			assert.Equal(t, want, st == OK, "%q", s)
		}
	}
	_, st := Scanner{Float64: true}.Value([]byte(`1e400`), 0)
	assert.Equal(t, Undecided, st, "a number a float64 may not hold")
	_, st = Scanner{}.Value([]byte(strings.Repeat(`[`, 70)+strings.Repeat(`]`, 70)), 0)
	assert.Equal(t, Undecided, st, "nesting past MaxDepth")
}

// ValueFlags reports what String found in every string of a value, keys
// included; Surrogate marks surrogate escapes, paired or not.
func TestValueFlags(t *testing.T) {
	for text, want := range map[string]int{
		`{"a":1,"b":[true,null]}`:          0,
		`"plain"`:                          0,
		`{"a":["x\ny"]}`:                   Escape,
		`{"a":"\u003c"}`:                   Escape | UnicodeEscape,
		`[{"k\ud83d\ude00":1}]`:            Escape | UnicodeEscape | Surrogate,
		`{"a":[1,{"b":"\udc00"}],"c":"é"}`: Escape | UnicodeEscape | Surrogate | NonASCII,
		`{"a":"\\ud800"}`:                  Escape,
		"{\"a\":[\"caf\xe9\"]}":            NonASCII,
	} {
		end, flags, st := Scanner{}.ValueFlags([]byte(text), 0)
		require.Equal(t, OK, st, text)
		assert.Equal(t, len(text), end, text)
		assert.Equal(t, want, flags, text)
	}
	_, flags := String([]byte(`"\uD800\uDFFF"`), 0)
	assert.Equal(t, Escape|UnicodeEscape|Surrogate, flags)
	_, flags = String([]byte(`"\ud7ff\ue000"`), 0)
	assert.Equal(t, Escape|UnicodeEscape, flags, "the code points around the surrogates")
}

// Escapes at every offset from the eight-byte words String and StringAt
// read, between runs of every length, decode as encoding/json decodes them.
func TestStringValueEscapesAtEveryOffset(t *testing.T) {
	escapes := []string{`\n`, `\"`, `\\`, `\/`, `\t`, `\u003c`, `\u00e9`, `\u20ac`, `\ud83d\ude00`, `\ud800`, `\udc00x`, `\ud83d\u0041`}
	for _, esc := range escapes {
		for pre := 0; pre <= 17; pre++ {
			for _, post := range []string{"", "a", "déjà vu →", strings.Repeat("z", 9)} {
				s := []byte(`"` + strings.Repeat("é", pre%3) + strings.Repeat("x", pre) + esc + post + esc + `"`)
				var want string
				require.NoError(t, json.Unmarshal(s, &want), "%s", s)
				end, flags := String(s, 0)
				require.Equal(t, len(s), end, "%s", s)
				assert.Equal(t, want, StringValue(s, flags), "%s", s)
				assert.Equal(t, want, StringValue(s, Unscanned), "%s", s)
				assert.Equal(t, want, string(AppendStringValue([]byte("kept"), s, flags)[4:]), "%s", s)
				v, vend, vflags, _ := StringAt(s, 0, nil)
				assert.Equal(t, []any{want, end, flags}, []any{v, vend, vflags}, "%s", s)
			}
		}
	}
}

// FuzzStringAt holds StringAt to String and StringValue: the same end,
// flags and value, with room of any size to begin with.
func FuzzStringAt(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, "\"bad \xff\xfe\\n\"", "\"cut \xe2\x82\\t\"", `"déjà\nvu"`, `"` + strings.Repeat("x", 40) + `\\"`, `"x\n` + strings.Repeat("é", 9) + `\u003c"`, "\"ctl\\n\x01\"", `"open\n`} {
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, b []byte, room int) {
		if len(b) == 0 || b[0] != '"' {
			return
		}
		end, flags := String(b, 0)
		got, gotEnd, gotFlags, buf := StringAt(b, 0, make([]byte, room%64&^(room>>63)))
		require.Equal(t, flags, gotFlags, "%q", b)
		if flags < 0 {
			return
		}
		assert.Equal(t, end, gotEnd, "%q", b)
		assert.Equal(t, StringValue(b[:end], flags), got, "%q", b)
		var want string
		require.NoError(t, json.Unmarshal(b[:end], &want))
		assert.Equal(t, want, got, "%q", b)
		// The room is kept for the next string.
		again, _, _, _ := StringAt(b, 0, buf)
		assert.Equal(t, got, again, "%q", b)
	})
}
