package pluginapi

import (
	"bytes"
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/compact-host/compact-host/abi"
)

// tenMiBOutput is a realistic tool output: text with quotes, tabs,
// backslashes and non-ASCII, all of which JSON must escape or check.
var tenMiBOutput = func() []byte {
	line := []byte("2024-05-01T12:00:00Z\tINFO\tserver \"api\" listening on C:\\srv — ok ✓ <tag> & more\n")
	return bytes.Repeat(line, 10<<20/len(line))
}()

// BenchmarkCodec10MiB compares the ABI frame (JSON header + raw blobs) with
// the alternatives for one 10 MiB truncation answer, encode then decode.
// RATIONALE.md, "## ABI", quotes its figures:
//
//	go test -run '^$' -bench Codec10MiB ./host/internal/pluginapi/
func BenchmarkCodec10MiB(b *testing.B) {
	b.Run("frame", func(b *testing.B) {
		b.SetBytes(int64(len(tenMiBOutput)))
		for b.Loop() {
			out, err := abi.Encode(&abi.TruncateResponse{Content: tenMiBOutput, Truncated: true})
			if err != nil {
				b.Fatal(err)
			}
			var resp abi.TruncateResponse
			if err := abi.Decode(out, &resp); err != nil || len(resp.Content) != len(tenMiBOutput) {
				b.Fatal(err)
			}
		}
	})
	type jsonString struct {
		Content   string `json:"content"`
		Truncated bool   `json:"truncated"`
	}
	b.Run("json-string", func(b *testing.B) {
		b.SetBytes(int64(len(tenMiBOutput)))
		for b.Loop() {
			out, err := json.Marshal(jsonString{Content: string(tenMiBOutput), Truncated: true})
			if err != nil {
				b.Fatal(err)
			}
			var resp jsonString
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.Content) != len(tenMiBOutput) {
				b.Fatal(err)
			}
		}
	})
	type jsonBytes struct {
		Content   []byte `json:"content"` // base64
		Truncated bool   `json:"truncated"`
	}
	b.Run("json-base64", func(b *testing.B) {
		b.SetBytes(int64(len(tenMiBOutput)))
		for b.Loop() {
			out, err := json.Marshal(jsonBytes{Content: tenMiBOutput, Truncated: true})
			if err != nil {
				b.Fatal(err)
			}
			var resp jsonBytes
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.Content) != len(tenMiBOutput) {
				b.Fatal(err)
			}
		}
	})
	// A protobuf bytes field stands for a generated TruncateResponse
	// message: the content is length-prefixed and copied, like a blob.
	b.Run("protobuf-bytes", func(b *testing.B) {
		b.SetBytes(int64(len(tenMiBOutput)))
		for b.Loop() {
			out, err := proto.Marshal(&wrapperspb.BytesValue{Value: tenMiBOutput})
			if err != nil {
				b.Fatal(err)
			}
			var resp wrapperspb.BytesValue
			if err := proto.Unmarshal(out, &resp); err != nil || len(resp.Value) != len(tenMiBOutput) {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCodecSmall is the same comparison for a small request, where
// the header dominates.
func BenchmarkCodecSmall(b *testing.B) {
	req := &abi.TruncateRequest{Category: "generic", ToolName: "bash", Content: []byte("ok\n"), MaxTokens: 100}
	b.Run("frame", func(b *testing.B) {
		for b.Loop() {
			out, _ := abi.Encode(req)
			var r abi.TruncateRequest
			if err := abi.Decode(out, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			out, _ := json.Marshal(req)
			var r abi.TruncateRequest
			if err := json.Unmarshal(out, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
