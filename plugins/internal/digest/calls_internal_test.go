package digest

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"
)

// referenceInput is decodeInput as json.Unmarshal into an any gives it,
// reduced to what Call.Input documents.
func referenceInput(raw json.RawMessage) Call {
	var c Call
	if len(raw) == 0 {
		return c
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		c.RawInput = string(raw)
		return c
	}
	switch x := v.(type) {
	case map[string]any:
		c.Input = map[string]any{}
		for k, v := range x {
			switch y := v.(type) {
			case string:
				c.Input[k] = y
			case []any:
				elems := []any{}
				for _, e := range y {
					if s, ok := e.(string); ok {
						elems = append(elems, s)
					} else {
						elems = append(elems, nil)
					}
				}
				c.Input[k] = elems
			default:
				c.Input[k] = nil
			}
		}
	case string:
		c.RawInput = x
	}
	c.Command = commandOf(c.Input)
	return c
}

func checkDecodeInput(t *testing.T, raw string) {
	t.Helper()
	var got Call
	decodeInput(&got, json.RawMessage(raw))
	want := referenceInput(json.RawMessage(raw))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decodeInput(%.200q):\n got %#v\nwant %#v", raw, got, want)
	}
}

var inputSamples = []string{
	`{"command":"ls -la","path":"a.go"}`, ` { "command" : [ "bash" , "-lc" , "go test ./..." ] } `,
	`{"cmd":[]}`, `{"cmd":["a",1]}`, `{"cmd":["a",["b"],{"c":"]"}]}`, `{"command":"a","command":5}`, `{"command":5,"command":"b"}`,
	`"*** Begin Patch\n*** Add File: x\n*** End Patch"`, `"esc\u00e9\n\t\"q\""`, `{"p\u0061th":"x","file_path":"\ud83d\ude00 \ud800"}`,
	"{\"path\":\"\xff\xfe\"}", "\"\xc3\"", `null`, `5`, `-1.5e3`, `true`, `[1,2]`, `{not json`, `{"a":1,}`, `{}`, `""`,
	`{"a":{"b":[1,"]",{"}":"{"}]},"path":"q","n":null,"t":true,"f":-0.5E+2}`, "{\"a\":\"x\"}\n", `{"a":"\\"}`, `{"a":"\\\""}`, `1E700`, `{"a":[1e400],"command":"x"}`, `{"n":-0,"m":1e-400}`,
}

func TestDecodeInputAsEncodingJSON(t *testing.T) {
	for _, raw := range inputSamples {
		checkDecodeInput(t, raw)
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "..", "shared", "corpus", "*"))
	n := 0
	for _, path := range files {
		s, err := formats.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range s.Messages {
			for _, b := range m.Content {
				if b.Type == abi.BlockToolUse {
					checkDecodeInput(t, string(b.Input))
					n++
				}
			}
		}
	}
	t.Logf("%d tool inputs of the corpus", n)
}

func FuzzDecodeInput(f *testing.F) {
	for _, raw := range inputSamples {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) { checkDecodeInput(t, raw) })
}

func TestDecodableAsEncodingJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, s := range append(inputSamples, deep(maxJSONDepth), deep(maxJSONDepth+1), `{"a":`+deep(maxJSONDepth-1)+`}`, `{"a":`+deep(maxJSONDepth)+`}`,
		"", " ", "01", "-", "1.", "1e", "1e+", ".5", "tru", "nul", `"\x"`, `"\u12"`, "\"a\nb\"", `[1,]`, `{"a" 1}`, `{"a":1 "b":2}`, `[] []`, "\t[ ]\r\n") {
		checkDecodable(t, s)
	}
}

func checkDecodable(t *testing.T, s string) {
	t.Helper()
	var v any
	if got, want := decodable(s), json.Unmarshal([]byte(s), &v) == nil; got != want {
		t.Errorf("decodable(%.100q) = %v, encoding/json says %v", s, got, want)
	}
}

func FuzzDecodable(f *testing.F) {
	for _, raw := range inputSamples {
		f.Add(raw)
	}
	f.Fuzz(checkDecodable)
}

func FuzzUnquoteJSON(f *testing.F) {
	for _, s := range []string{`a\nb`, `\ud83d\ude00`, `\ud800\u0041`, `\udc00`, "\xff\\t", `\"\\\/\b\f\r`, "é\\u00e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		tok := `"` + body + `"`
		var want string
		if json.Unmarshal([]byte(tok), &want) != nil {
			return
		}
		if got := unquoteJSON(tok); got != want {
			t.Errorf("unquoteJSON(%q) = %q, want %q", tok, got, want)
		}
	})
}
