package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
)

// Run with:
//
//	go test ./internal/server -run '^$' -bench . -benchmem
//
// Client and server share the process, so allocations count both sides
// of the loopback connection.

func benchPost(b *testing.B, edit func(*Options), path string, body []byte) {
	_, ts := start(b, edit)
	// The first request loads the built-in plugins.
	if r := call(b, ts, "POST", path, body); r.Status != 200 {
		b.Fatalf("%d %s", r.Status, r.Body)
	}
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for b.Loop() {
		r, err := do(ts, "POST", path, body)
		if err != nil || r.Status != 200 {
			b.Fatalf("%v %d %.200s", err, r.Status, r.Body)
		}
	}
}

// sonnet is the default model's real budget, with its default tokenizer.
func sonnet(o *Options) { o.Config = host.Config{Model: "claude-sonnet-4-5"} }

// realistic is a 40-turn coding session of about 70,000 tokens as an
// Anthropic request: the size at which agents on a 200k model compact.
func realistic(b *testing.B) []byte {
	return encode(b, formats.Anthropic, codingSession(1, 40, 800))
}

func BenchmarkCompact(b *testing.B) {
	b.Run("anthropic-70k", func(b *testing.B) {
		body, _ := json.Marshal(CompactRequest{Session: realistic(b)})
		benchPost(b, sonnet, "/v1/compact", body)
	})
	b.Run("claude-code-corpus", func(b *testing.B) {
		data, err := os.ReadFile(filepath.Join(repoRoot(b), "..", "shared", "corpus", "claude-code-go-cli.jsonl"))
		if err != nil {
			b.Skipf("corpus absent: %v", err)
		}
		session, _ := json.Marshal(string(data))
		body, _ := json.Marshal(CompactRequest{Session: session, OutputFormat: formats.Anthropic, Options: CompactOptions{EngineOptions: EngineOptions{ContextWindow: 32000}}})
		benchPost(b, sonnet, "/v1/compact", body)
	})
}

func BenchmarkCheck(b *testing.B) {
	b.Run("measure-70k", func(b *testing.B) {
		body, _ := json.Marshal(CheckRequest{Session: realistic(b), Request: GateRequest{ToolSchemaTokens: 5000}})
		benchPost(b, sonnet, "/v1/check", body)
	})
	// A 150,000 window less the 64,000 reply reserve: 73,000 tokens are
	// 85% of the budget, over the compaction point, under the emergency.
	b.Run("apply-70k-compacts", func(b *testing.B) {
		body, _ := json.Marshal(CheckRequest{Session: realistic(b), Apply: true, Options: EngineOptions{ContextWindow: 150000}})
		var got CheckResponse
		_, ts := start(b, sonnet)
		call(b, ts, "POST", "/v1/check", body).decode(b, &got)
		if got.Decision.Action != "compacted" {
			b.Fatalf("the gate did %q", got.Decision.Action)
		}
		benchPost(b, sonnet, "/v1/check", body)
	})
}

func BenchmarkTruncate(b *testing.B) {
	body, _ := json.Marshal(TruncateRequest{Tool: "Bash", Content: testOutput(20000), MaxTokens: 2000})
	benchPost(b, sonnet, "/v1/truncate", body)
}
