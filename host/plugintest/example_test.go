package plugintest_test

import (
	"context"
	"os"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugintest"
	"github.com/compact-host/compact-host/sdk"
)

// firstLines keeps the first lines of an output that fit the cap.
type firstLines struct{}

func (firstLines) Truncate(ctx context.Context, host sdk.Host, req *abi.TruncateRequest) (*abi.TruncateResponse, error) {
	budget := req.MaxTokens*4 - 64
	if len(req.Content) <= budget {
		return &abi.TruncateResponse{Content: req.Content}, nil
	}
	cut := budget
	for cut > 0 && req.Content[cut-1] != '\n' {
		cut--
	}
	out := append(append([]byte{}, req.Content[:cut]...), "[… rest of the output omitted]\n"...)
	return &abi.TruncateResponse{Content: out, Truncated: true, OmittedBytes: len(req.Content) - cut}, nil
}

// Verify runs the conformance checks on any plugin; here one linked
// in-process. The same call verifies a .wasm file or a process plugin
// opened with plugin.Open.
func ExampleVerify() {
	p := plugin.InProcess(&sdk.Plugin{Name: "firstlines", Version: "1.0.0", Truncator: firstLines{}, Categories: []string{"generic"}}, plugin.Options{})
	report := plugintest.Verify(context.Background(), p)
	report.WriteText(os.Stdout)
	// Output:
	// plugin firstlines 1.0.0 (ABI v1.1, kinds truncator)
	// PASS info
	// PASS kinds
	// SKIP summarize/history: not a strategy
	// SKIP summarize/turn_prefix: not a strategy
	// PASS truncate/generic
	// PASS truncate/unknown_category
	// PASS garbage_request
	// SKIP deadline: not a strategy
	// PASS concurrent
	// 6 passed, 0 failed, 3 skipped
}
