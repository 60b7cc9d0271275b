package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestRoundTripEveryDocument(t *testing.T) {
	msgs := []Message{
		{ID: "m1", Role: RoleUser, Content: []Block{{Type: BlockText, Text: "fix the \"bug\"\n\x00 in main.go"}}, Pinned: true},
		{ID: "m2", Role: RoleAssistant, Usage: &Usage{InputTokens: 10, OutputTokens: 2, CacheReadTokens: 3}, Content: []Block{
			{Type: BlockThinking, Text: "hmm"},
			{Type: BlockToolUse, ID: "t1", Name: "Read", Input: json.RawMessage(`{"path":"main.go"}`)},
		}},
		{ID: "m3", Role: RoleUser, Content: []Block{{Type: BlockToolResult, ToolUseID: "t1", Text: "package main", IsError: true}, {Type: BlockImage, MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0}}}},
	}
	docs := []any{
		&Info{ABIMajor: Major, ABIMinor: Minor, Name: "x", Kinds: []string{KindStrategy, KindTruncator}, Categories: []string{"head-tail"}},
		&SummarizeRequest{Kind: FoldHistory, Messages: msgs, PreviousSummary: "prev", FileOps: FileOps{Read: []string{"a"}, Modified: []string{"b"}}, TargetTokens: 2000, Focus: "auth", ModelAvailable: true},
		&SummarizeRequest{Kind: FoldHistory, Messages: msgs, TargetTokens: 2000, Markers: []Marker{{Ref: "s-0a1b", Kind: MarkerSpan, Bytes: 9000}, {Ref: "t-ff", Kind: MarkerToolOutput, ToolName: "Bash", Bytes: 4096}}},
		&SummarizeResponse{Summary: "## Active Task\n…", Offline: true},
		&TruncateRequest{Category: "head-tail", ToolName: "Bash", Content: bytes.Repeat([]byte("line\n"), 1000), MaxTokens: 100},
		&TruncateResponse{Content: []byte("short"), Truncated: true, OmittedBytes: 4995, OmittedLines: 999},
		&CompleteRequest{System: "sys", Messages: msgs, MaxTokens: 500},
		&CompleteResponse{Text: "done", Usage: Usage{InputTokens: 1, OutputTokens: 2}, Model: "m"},
		&CountTokensRequest{Text: "hello"},
		&CountTokensResponse{Tokens: 7},
	}
	for _, doc := range docs {
		frame, err := Encode(doc)
		if err != nil {
			t.Fatalf("Encode(%T): %v", doc, err)
		}
		got := reflect.New(reflect.TypeOf(doc).Elem()).Interface()
		if err := Decode(frame, got); err != nil {
			t.Fatalf("Decode(%T): %v", doc, err)
		}
		if !reflect.DeepEqual(got, doc) {
			t.Errorf("%T round trip:\n got %+v\nwant %+v", doc, got, doc)
		}
	}
}

func TestLargeContentTravelsUnescaped(t *testing.T) {
	content := bytes.Repeat([]byte("\"quoted\" \\ line\n"), 1<<16)
	frame, err := Encode(&TruncateRequest{Category: "generic", Content: content, MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(frame, content) {
		t.Fatal("content is not carried verbatim in the frame")
	}
	if overhead := len(frame) - len(content); overhead > 200 {
		t.Errorf("frame overhead %d bytes, want under 200", overhead)
	}
}

// longConversation is n messages of the shapes a session has: requests,
// tool calls with escaped strings in their inputs, results, and replies.
func longConversation(n int) []Message {
	var ms []Message
	for i := 0; len(ms) < n; i++ {
		id := strconv.Itoa(i)
		ms = append(ms,
			Message{ID: "u" + id, Role: RoleUser, Content: []Block{{Type: BlockText, Text: "fix the test " + id}}},
			Message{ID: "a" + id, Role: RoleAssistant, Usage: &Usage{InputTokens: i, OutputTokens: 1}, Content: []Block{
				{Type: BlockText, Text: "Running it."},
				{Type: BlockToolUse, ID: "t" + id, Name: "Bash", Input: json.RawMessage(`{"command":"go test ./... 2>&1 | grep -v \"ok\"","n":` + id + `}`)},
			}},
			Message{ID: "r" + id, Role: RoleUser, Content: []Block{{Type: BlockToolResult, ToolUseID: "t" + id, Text: "FAIL\n" + id}}},
		)
	}
	return ms[:n]
}

// Decoding costs a few allocations per frame, not one per string or per
// message: inside a wasm plugin each one is dear (RATIONALE.md, Offline
// summaries).
func TestDecodeAllocatesPerFrameNotPerString(t *testing.T) {
	frame, err := Encode(&SummarizeRequest{Kind: FoldHistory, Messages: longConversation(3000), TargetTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(3, func() {
		var req SummarizeRequest
		if err := Decode(frame, &req); err != nil {
			t.Fatal(err)
		}
	})
	// 1,000 of the messages carry usage, a pointer each.
	if allocs > 1000+64 {
		t.Errorf("decoding 3,000 messages made %.0f allocations, want at most %d", allocs, 1000+64)
	}
}

// Strings and tool inputs of a decoded document are copies: the frame may
// be overwritten (a plugin's request buffer is reused) without changing
// them, and growing one message's blocks leaves the next message's alone.
func TestDecodedDocumentOutlivesItsFrame(t *testing.T) {
	want := longConversation(30)
	frame, err := Encode(&SummarizeRequest{Kind: FoldHistory, Messages: want, TargetTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	var req SummarizeRequest
	if err := Decode(frame, &req); err != nil {
		t.Fatal(err)
	}
	for i := range frame {
		frame[i] = 'x'
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Fatal("decoded messages changed with the frame")
	}
	req.Messages[0].Content = append(req.Messages[0].Content, Block{Type: BlockText, Text: "appended"})
	if !reflect.DeepEqual(req.Messages[1:], want[1:]) {
		t.Fatal("appending to one message's blocks changed another message")
	}
}

func TestErrorFrame(t *testing.T) {
	frame := MustEncodeError(Errorf(CodeUnsupported, "no category %q", "x"))
	var resp TruncateResponse
	err := Decode(frame, &resp)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUnsupported || !strings.Contains(e.Message, `"x"`) {
		t.Fatalf("got %v", err)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	good, _ := Encode(&SummarizeResponse{Summary: "s"})
	v2 := append([]byte{}, good...)
	v2[3] = 2
	w := &frameWriter{jsonWriter: jsonWriter{b: []byte(`{"body":{"summary":7}}`)}}
	badRefFrame := w.finish()
	cases := map[string][]byte{
		"empty":          nil,
		"short":          good[:8],
		"bad magic":      append([]byte("XXXX"), good[4:]...),
		"other major":    v2,
		"truncated blob": good[:len(good)-1],
		"trailing":       append(append([]byte{}, good...), 0),
		"blob ref range": badRefFrame,
	}
	for name, frame := range cases {
		var resp SummarizeResponse
		err := Decode(frame, &resp)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
	if err := Decode(v2, &SummarizeResponse{}); !strings.Contains(err.Error(), "ABI v2") {
		t.Errorf("other major: %v does not name the version", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, doc := range []any{
		&SummarizeRequest{Kind: FoldHistory, Messages: []Message{{Role: RoleUser, Content: []Block{{Type: BlockText, Text: "hi"}}}}},
		&TruncateResponse{Content: []byte("x"), Truncated: true},
	} {
		b, _ := Encode(doc)
		f.Add(b)
	}
	f.Add(MustEncodeError(Errorf(CodeInternal, "boom")))
	f.Fuzz(func(t *testing.T, frame []byte) {
		for _, doc := range []any{&SummarizeRequest{}, &SummarizeResponse{}, &TruncateRequest{}, &TruncateResponse{}, &CompleteRequest{}, &CompleteResponse{}, &Info{}, &CountTokensRequest{}, &CountTokensResponse{}} {
			err := Decode(frame, doc)
			if err == nil {
				continue
			}
			var e *Error
			if !errors.Is(err, ErrMalformed) && !errors.As(err, &e) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
		}
	})
}
