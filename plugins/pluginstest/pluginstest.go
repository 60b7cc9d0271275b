// Package pluginstest helps test compact-host plugins in-process: fake
// hosts (one without a model, one with canned completions), sample
// sessions and tool outputs, and golden files refreshed with -update.
//
// It is used by the built-in plugins' tests and benchmarks, and by the
// runtime's tests that drive the same plugins over wasm and process
// transports.
package pluginstest

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/compact-host/compact-host/abi"
	sdk "github.com/compact-host/compact-host/sdk/core"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Golden compares got with testdata/<name>.golden, or rewrites that file
// when the test runs with -update.
func Golden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("output differs from %s (run go test with -update to accept it)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// Host is a fake sdk.Host. With no Replies, Complete fails with
// abi.CodeNoModel, as a host with no model configured does; otherwise it
// answers with Replies in turn (the last one again once they run out) and
// records every request. CountTokens estimates one token per four bytes
// unless CountErr is set.
type Host struct {
	Replies []string
	// CompleteErr, when set, is returned by every Complete call.
	CompleteErr error
	CountErr    error

	mu       sync.Mutex
	requests []*abi.CompleteRequest
	logs     []string
}

// NoModel returns a host without a model.
func NoModel() *Host { return &Host{} }

// WithReplies returns a host whose model answers with replies in turn.
func WithReplies(replies ...string) *Host { return &Host{Replies: replies} }

// Complete implements sdk.Host.
func (h *Host) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if h.CompleteErr != nil {
		return nil, h.CompleteErr
	}
	if len(h.Replies) == 0 {
		return nil, abi.Errorf(abi.CodeNoModel, "no model configured")
	}
	h.requests = append(h.requests, req)
	i := min(len(h.requests), len(h.Replies)) - 1
	return &abi.CompleteResponse{Text: h.Replies[i], Model: "fake", Usage: abi.Usage{InputTokens: 1, OutputTokens: 1}}, nil
}

// CountTokens implements sdk.Host.
func (h *Host) CountTokens(ctx context.Context, text string) (int, error) {
	if h.CountErr != nil {
		return 0, h.CountErr
	}
	return (len(text) + 3) / 4, nil
}

// Log implements sdk.Host.
func (h *Host) Log(level slog.Level, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, level.String()+" "+msg)
}

// Requests returns the completion requests the host received.
func (h *Host) Requests() []*abi.CompleteRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*abi.CompleteRequest(nil), h.requests...)
}

// Logs returns what the plugin logged.
func (h *Host) Logs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.logs...)
}

var _ sdk.Host = (*Host)(nil)
