package abi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// headerFrame wraps a header text in a frame with the given blobs.
func headerFrame(header string, blobs ...string) []byte {
	w := &frameWriter{jsonWriter: jsonWriter{b: []byte(header)}}
	for _, b := range blobs {
		w.blobs = append(w.blobs, []byte(b))
	}
	return w.finish()
}

// The header's strings must read back as encoding/json reads them, and
// the writer's output must be JSON any reader accepts.
func FuzzStringsAgreeWithEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\s/", "\x00\x1f\n\t\r", "é ✓ 😀", "\xff\xfe bad", "<&>", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want string
		std, _ := json.Marshal(s)
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		ours := appendJSONString(nil, s)
		if !json.Valid(ours) {
			t.Fatalf("writer produced invalid JSON %q", ours)
		}
		var viaStd string
		if err := json.Unmarshal(ours, &viaStd); err != nil || viaStd != want {
			t.Fatalf("encoding/json reads our %q as %q, want %q", ours, viaStd, want)
		}
		// Our reader on encoding/json's escapes (\u003c, surrogate pairs).
		r := jsonReader{b: std}
		if got := r.str("s"); r.err != nil || got != want {
			t.Fatalf("reader got %q (%v) from %q, want %q", got, r.err, std, want)
		}
		frame, err := Encode(&TruncateRequest{Category: s, ToolName: s})
		if err != nil {
			t.Fatal(err)
		}
		var back TruncateRequest
		if err := Decode(frame, &back); err != nil || back.Category != want || back.ToolName != want {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
	})
}

// Whatever header Decode accepts is valid JSON: the reader is never more
// lenient than the spec.
func FuzzHeaderAcceptedOnlyIfValidJSON(f *testing.F) {
	for _, h := range []string{
		`{"body":{"category":"x","content":0,"max_tokens":3}}`,
		`{"body":{"category":"x","extra":[1,{"a":null},-0.5e+3,"\u00e9"],"max_tokens":null}}`,
		`{"error":{"code":"internal","message":"m"}}`,
		`{"body":{"category":"x",}}`,
		`{"body":{"max_tokens":01}}`,
		`{"body":{"category":"\ud83d\ude00"}} `,
		`{"body":{} ,}`,
	} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, header string) {
		frame := headerFrame(header, "blob")
		err := Decode(frame, &TruncateRequest{})
		if err == nil || errors.As(err, new(*Error)) {
			if !json.Valid([]byte(header)) {
				t.Fatalf("accepted invalid JSON %q", header)
			}
			return
		}
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

func TestHeaderReading(t *testing.T) {
	deep := `{"body":{"x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}`
	cases := []struct {
		header string
		want   TruncateRequest
		err    string // substring of the error; empty: no error
	}{
		{header: `{"body":{"category":"c","tool_name":"Bash","content":0,"max_tokens":12}}`,
			want: TruncateRequest{Category: "c", ToolName: "Bash", Content: []byte("blob"), MaxTokens: 12}},
		{header: " {\n\t\"body\" : { \"max_tokens\" : -0 , \"future\" : {\"a\":[true,false,null,1.5e-3]} } } ",
			want: TruncateRequest{}},
		{header: `{"body":{"category":null,"content":null,"max_tokens":null}}`, want: TruncateRequest{}},
		{header: `{"body":{"category":"a\u0000b\/c"}}`, want: TruncateRequest{Category: "a\x00b/c"}},
		{header: `{"body":{"max_tokens":1.5}}`, err: "max_tokens"},
		{header: `{"body":{"max_tokens":1e3}}`, err: "not an integer"},
		{header: `{"body":{"max_tokens":99999999999999999999}}`, err: "not an integer"},
		{header: `{"body":{"max_tokens":01}}`, err: "want ',' or '}'"},
		{header: `{"body":{"category":5}}`, err: "category: want a string"},
		{header: `{"body":{"content":-1}}`, err: "negative"},
		{header: `{"body":{"content":1}}`, err: "out of range"},
		{header: `{"body":{"category":"x` + "\n" + `"}}`, err: "control character"},
		{header: `{"body":{"category":"\x"}}`, err: "invalid escape"},
		{header: `{"body":{"category":"\u12"}}`, err: "escape"},
		{header: `{"body":{}}x`, err: "after the header"},
		{header: `{"body":{}}` + "\x00", err: "after the header"},
		{header: `{"body":{},}`, err: "want a key"},
		{header: `{"body":{"a":tru}}`, err: "invalid literal"},
		{header: `{}`, err: "neither body nor error"},
		{header: `{"body":null}`, err: "neither body nor error"},
		{header: `[]`, err: "want an object"},
		{header: ``, err: "want an object"},
		{header: deep, err: "nested too deep"},
	}
	for _, c := range cases {
		var got TruncateRequest
		err := Decode(headerFrame(c.header, "blob"), &got)
		if c.err == "" {
			if err != nil {
				t.Errorf("%q: %v", c.header, err)
			} else if got.Category != c.want.Category || got.ToolName != c.want.ToolName || string(got.Content) != string(c.want.Content) || got.MaxTokens != c.want.MaxTokens {
				t.Errorf("%q: got %+v, want %+v", c.header, got, c.want)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%.60q: got %v, want ErrMalformed with %q", c.header, err, c.err)
		}
		if got.Category != "" || got.MaxTokens != 0 {
			t.Errorf("%q: a failed decode wrote the document: %+v", c.header, got)
		}
	}
}

func TestErrorTakesPrecedenceOverBody(t *testing.T) {
	err := Decode(headerFrame(`{"body":{"category":"c"},"error":{"message":"m","extra":1}}`), &TruncateRequest{})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInternal || e.Message != "m" {
		t.Fatalf("got %v, want the error frame with code %s", err, CodeInternal)
	}
}

func TestInvalidToolInputIsRefused(t *testing.T) {
	for _, input := range []string{`{"a":`, `{} {}`, `nope`} {
		_, err := Encode(&CompleteRequest{Messages: []Message{{Role: RoleAssistant, Content: []Block{{Type: BlockToolUse, ID: "t", Name: "n", Input: json.RawMessage(input)}}}}})
		if err == nil || !strings.Contains(err.Error(), "input") {
			t.Errorf("input %q: got %v, want an error naming the field", input, err)
		}
	}
}
