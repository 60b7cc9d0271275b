package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/tenant"
	"github.com/stretchr/testify/require"
)

// bigConversation is an Anthropic request of about tokens tokens
// (chars/4) in 4,000-character messages, tool round trips included.
func bigConversation(tb testing.TB, tokens int) []byte {
	var msgs []map[string]any
	filler := strings.Repeat("the parser drops the last token when the input ends in a comment; ", 70)[:4000]
	for i := 0; len(msgs)*1000 < tokens; i++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("turn %d: %s", i, filler)})
		if i%3 == 2 {
			id := fmt.Sprintf("toolu_%04d", i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": id, "name": "read_file", "input": map[string]any{"path": "p.go"}}}},
				map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": filler}}})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": []map[string]any{{"type": "text", "text": filler}}})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "and now?"})
	body, err := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 8000, "system": "You are a careful coding agent.",
		"tools": []map[string]any{{"name": "read_file", "input_schema": map[string]any{"type": "object"}}}, "messages": msgs})
	require.NoError(tb, err)
	return body
}

// benchProxy is a proxy with a 1M window, so a 200k conversation needs no
// compaction, in front of an upstream that answers at once.
func benchProxy(b *testing.B) (*Proxy, *httptest.Server) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusOK, anthropicMessage("claude-sonnet-4-5", "ok", 1))
	}))
	b.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	p, err := New(Options{Upstream: u, Config: host.Config{ContextWindow: 1_000_000}, Registry: registry, Offline: true,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(b, err)
	return p, up
}

// reportPercentiles adds p50 and p99 of the samples to the benchmark.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkAddedLatency is the work the proxy does on a request before it
// forwards it: scan, conversation ID, store lookup, the gate's bound, and
// the splice when a compaction is stored.
func BenchmarkAddedLatency(b *testing.B) {
	body := bigConversation(b, 200_000)
	p, _ := benchProxy(b)
	b.Run("200k-no-compaction", func(b *testing.B) {
		measurePrepare(b, p, body, actionForwarded)
	})
	b.Run("200k-stored-compaction", func(b *testing.B) {
		// A compaction of the first half stored as a previous request
		// would have: every request now hashes and splices.
		x := p.newExchange(KindAnthropic, "/v1/messages", http.Header{}, credentials{tenant: tenant.Anonymous})
		x.prepare(context.Background(), body)
		half := len(x.raw.msgs) / 2
		for m := x.raw.msg(half); !bytes.Contains(m, []byte(`"role":"user"`)) || bytes.Contains(m, []byte("tool_result")); m = x.raw.msg(half) {
			half++
		}
		ph := x.prefixHash(half)
		require.NoError(b, p.o.Store.Put(context.Background(), &store.Record{Key: x.recordKey(ph), Conversation: x.conv, PrefixHash: ph,
			FoldedCount: half, Replacement: []byte(`[{"role":"user","content":"[Context compacted] summary"}]`), Summary: "summary", Strategy: "structured"}))
		measurePrepare(b, p, body, actionSpliced)
	})
}

// bigResponses is a Codex-shaped Responses request of about tokens
// tokens (chars/4): user turns, encrypted reasoning, shell calls with
// their outputs and answers, in 4,000-character items.
func bigResponses(tb testing.TB, tokens int) []byte {
	filler := strings.Repeat("the parser drops the last token when the input ends in a comment; ", 70)[:4000]
	items := []map[string]any{{"type": "message", "role": "developer", "content": []map[string]any{{"type": "input_text", "text": "workspace-write"}}}}
	for i := 0; len(items)*1000 < tokens; i++ {
		call := fmt.Sprintf("call_%04d", i)
		items = append(items,
			map[string]any{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": fmt.Sprintf("turn %d: %s", i, filler)}}},
			map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%04d", i), "summary": []any{}, "encrypted_content": filler},
			map[string]any{"type": "function_call", "name": "shell", "call_id": call, "arguments": `{"command":["cat","p.go"]}`},
			map[string]any{"type": "function_call_output", "call_id": call, "output": filler},
			map[string]any{"type": "message", "role": "assistant", "content": []map[string]any{{"type": "output_text", "text": filler}}})
	}
	items = append(items, map[string]any{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": "and now?"}}})
	body, err := json.Marshal(map[string]any{"model": "gpt-5-codex", "max_output_tokens": 8000, "instructions": "You are Codex, a coding agent.",
		"tools":  []map[string]any{{"type": "function", "name": "shell", "parameters": map[string]any{"type": "object"}}},
		"stream": true, "store": false, "include": []string{"reasoning.encrypted_content"}, "input": items})
	require.NoError(tb, err)
	return body
}

// BenchmarkAddedLatencyResponses is BenchmarkAddedLatency for a
// Codex-shaped Responses request.
func BenchmarkAddedLatencyResponses(b *testing.B) {
	body := bigResponses(b, 200_000)
	p, _ := benchProxy(b)
	b.Run("200k-no-compaction", func(b *testing.B) {
		measurePrepareAs(b, p, kindResponses, "/v1/responses", body, actionForwarded)
	})
}

// measurePrepare times the proxy's work on body before forwarding it, and
// fails unless every request ends in want.
func measurePrepare(b *testing.B, p *Proxy, body []byte, want string) {
	measurePrepareAs(b, p, KindAnthropic, "/v1/messages", body, want)
}

// measurePrepareAs is measurePrepare for a request of kind on path.
func measurePrepareAs(b *testing.B, p *Proxy, kind, path string, body []byte, want string) {
	samples := make([]time.Duration, 0, b.N)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		began := time.Now()
		x := p.newExchange(kind, path, http.Header{}, credentials{tenant: tenant.Anonymous})
		x.prepare(context.Background(), body)
		samples = append(samples, time.Since(began))
		if x.action != want {
			b.Fatalf("action %s, want %s", x.action, want)
		}
	}
	reportPercentiles(b, samples)
}

// BenchmarkThroughput sends the 200k conversation through the proxy over
// loopback at 1, 4 and 16 concurrent clients, and straight to the
// upstream for comparison.
func BenchmarkThroughput(b *testing.B) {
	body := bigConversation(b, 200_000)
	p, up := benchProxy(b)
	front := httptest.NewServer(p)
	b.Cleanup(front.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, target := range []struct{ name, url string }{{"proxy", front.URL}, {"direct", up.URL}} {
		for _, c := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/c%d", target.name, c), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.SetParallelism(max(1, c/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						resp, err := client.Post(target.url+"/v1/messages", "application/json", bytes.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkSplit compares the scanner with what encoding/json needs to
// find the same raw messages, on the 200k conversation.
func BenchmarkSplit(b *testing.B) {
	body := bigConversation(b, 200_000)
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := scanRequest(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json-raw", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var top map[string]json.RawMessage
			var msgs []json.RawMessage
			if err := json.Unmarshal(body, &top); err != nil {
				b.Fatal(err)
			}
			if err := json.Unmarshal(top["messages"], &msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sha256-all-messages", func(b *testing.B) {
		r, err := scanRequest(body)
		require.NoError(b, err)
		x := &exchange{raw: r}
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			x.prefixHash(len(r.msgs))
		}
	})
}
