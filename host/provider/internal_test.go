package provider

import (
	"net/http"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
)

func TestBackoff(t *testing.T) {
	base, max := 100*time.Millisecond, time.Second
	for attempt, nominal := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		for range 50 {
			d, ok := backoff(base, max, attempt, 0)
			if !ok || d < nominal/2 || d > nominal {
				t.Fatalf("backoff(attempt %d) = %v, %v; want within [%v, %v]", attempt, d, ok, nominal/2, nominal)
			}
		}
	}
	// Retry-After is a floor.
	if d, ok := backoff(base, max, 1, 700*time.Millisecond); !ok || d < 700*time.Millisecond {
		t.Errorf("backoff with Retry-After 700ms = %v, %v", d, ok)
	}
	// Beyond max, no retry.
	if _, ok := backoff(base, max, 1, 2*time.Second); ok {
		t.Error("a Retry-After beyond the maximum delay was accepted")
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		header http.Header
		want   time.Duration
	}{
		{http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {"0"}}, 0},
		{http.Header{"Retry-After": {now.Add(30 * time.Second).Format(http.TimeFormat)}}, 30 * time.Second},
		{http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{nil, 0},
	} {
		if got := retryAfter(tt.header, now); got != tt.want {
			t.Errorf("retryAfter(%v) = %v, want %v", tt.header, got, tt.want)
		}
	}
}

func TestErrorFieldsShapes(t *testing.T) {
	for _, tt := range []struct {
		body, code, typ, msg string
	}{
		{`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`, "", "invalid_request_error", "prompt is too long"},
		{`{"error":{"message":"m","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, "context_length_exceeded", "invalid_request_error", "m"},
		{`{"error":{"code":400,"message":"m","type":"exceed_context_size_error","n_ctx":4096}}`, "400", "exceed_context_size_error", "m"},
		{`{"error":"the input length exceeds the context length"}`, "", "", "the input length exceeds the context length"},
		{`{"object":"error","message":"m","type":"BadRequestError","param":null,"code":400}`, "400", "BadRequestError", "m"},
		{`{"message":"Input is too long for requested model."}`, "", "", "Input is too long for requested model."},
		{`not json`, "", "", ""},
	} {
		code, typ, msg := errorFields([]byte(tt.body))
		if code != tt.code || typ != tt.typ || msg != tt.msg {
			t.Errorf("errorFields(%s) = %q, %q, %q; want %q, %q, %q", tt.body, code, typ, msg, tt.code, tt.typ, tt.msg)
		}
	}
}

func TestRender(t *testing.T) {
	p := render(&abi.CompleteRequest{
		System: "sys",
		Messages: []abi.Message{
			{Role: abi.RoleSystem, Content: []abi.Block{{Type: abi.BlockText, Text: "pinned rules"}}},
			{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "a"}}},
			{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockImage, MediaType: "image/png", Data: []byte{1, 2, 3}}}},
			{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockThinking, Text: "hidden"}}},
			{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "b"}, {Type: "server_tool_use"}}},
			{Role: "tool", Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "t1", Text: "out"}}},
		},
	})
	want := prompt{
		system: "sys\n\npinned rules",
		turns: []turn{
			{abi.RoleUser, "a\n\n[image image/png, 3 bytes, not shown]"},
			{abi.RoleAssistant, "b\n[server_tool_use block, not shown]"},
			{abi.RoleUser, "[tool result id=t1] out"},
		},
	}
	if p.system != want.system || len(p.turns) != len(want.turns) {
		t.Fatalf("render = %+v, want %+v", p, want)
	}
	for i := range want.turns {
		if p.turns[i] != want.turns[i] {
			t.Errorf("turn %d = %+v, want %+v", i, p.turns[i], want.turns[i])
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := Config{Kind: KindAnthropic, APIKey: "k", Model: "m"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxTokens != DefaultMaxTokens || c.Timeout != DefaultTimeout || c.MaxRetries != DefaultMaxRetries ||
		c.RetryBaseDelay != DefaultRetryBaseDelay || c.RetryMaxDelay != DefaultRetryMaxDelay || c.HTTPClient == nil {
		t.Errorf("defaults = %+v", c)
	}
	c, _ = Config{Kind: KindAnthropic, APIKey: "k", Model: "m", MaxRetries: -1}.withDefaults()
	if c.MaxRetries != 0 {
		t.Errorf("MaxRetries -1 became %d, want 0 retries", c.MaxRetries)
	}
}
