package abi

import (
	"encoding/json"
	"fmt"
	"testing"
)

// The codec runs twice on each side of every plugin call, inside wasm
// plugins too; see RATIONALE.md, ABI.
//
//	cd abi && go test -run '^$' -bench . -benchmem .

func benchDocs() map[string]any {
	var msgs []Message
	for i := range 20 {
		msgs = append(msgs,
			Message{ID: fmt.Sprint("u", i), Role: RoleUser, Content: []Block{{Type: BlockText, Text: "please fix the failing test in pkg/server"}}},
			Message{ID: fmt.Sprint("a", i), Role: RoleAssistant, Usage: &Usage{InputTokens: 1200 + i, OutputTokens: 80}, Content: []Block{
				{Type: BlockText, Text: "Reading the file."},
				{Type: BlockToolUse, ID: fmt.Sprint("t", i), Name: "Read", Input: json.RawMessage(`{"path":"pkg/server/server.go","limit":200}`)},
			}},
			Message{ID: fmt.Sprint("r", i), Role: RoleUser, Content: []Block{{Type: BlockToolResult, ToolUseID: fmt.Sprint("t", i), Text: "package server\n\nfunc main() {}\n"}}},
		)
	}
	return map[string]any{
		"truncate-noop": &TruncateRequest{Category: "noop", Content: []byte("ok"), MaxTokens: 2},
		"summarize-60":  &SummarizeRequest{Kind: FoldHistory, Messages: msgs, FileOps: FileOps{Read: []string{"pkg/server/server.go"}}, TargetTokens: 2000},
	}
}

func BenchmarkEncode(b *testing.B) {
	for name, doc := range benchDocs() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for name, doc := range benchDocs() {
		frame, err := Encode(doc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				switch doc.(type) {
				case *TruncateRequest:
					err = Decode(frame, new(TruncateRequest))
				case *SummarizeRequest:
					err = Decode(frame, new(SummarizeRequest))
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
