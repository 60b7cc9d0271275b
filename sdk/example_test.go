package sdk_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/sdk"
)

// requests is the strategy of the package documentation.
type requests struct{}

func (requests) Summarize(ctx context.Context, host sdk.Host, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	if req.ModelAvailable {
		resp, err := host.Complete(ctx, &abi.CompleteRequest{System: "Summarize this conversation; keep paths verbatim.", Messages: req.Messages})
		if err == nil {
			return &abi.SummarizeResponse{Summary: resp.Text}, nil
		}
	}
	var b strings.Builder
	for _, m := range req.Messages {
		for _, blk := range m.Content {
			if m.Role == abi.RoleUser && blk.Type == abi.BlockText {
				b.WriteString("- " + blk.Text + "\n")
			}
		}
	}
	return &abi.SummarizeResponse{Summary: "The user asked:\n" + b.String(), Offline: true}, nil
}

// offline is a host with no model, as a host without an API key answers.
type offline struct{}

func (offline) Complete(context.Context, *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	return nil, abi.Errorf(abi.CodeNoModel, "no model")
}
func (offline) CountTokens(_ context.Context, s string) (int, error) { return len(s) / 4, nil }
func (offline) Log(slog.Level, string)                               {}

// The plugin of the package documentation, called as the host calls it:
// a frame in, a frame out.
func Example() {
	p := &sdk.Plugin{Name: "requests", Version: "1.0.0", Strategy: requests{}}
	req, _ := abi.Encode(&abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: []abi.Message{
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "fix the flaky test in pkg/queue"}}},
		{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "Done."}}},
	}})
	var resp abi.SummarizeResponse
	if err := abi.Decode(p.Handle(context.Background(), offline{}, abi.ExportSummarize, req), &resp); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(resp.Summary)
	fmt.Println("offline:", resp.Offline, "kinds:", p.Info().Kinds)
	// Output:
	// The user asked:
	// - fix the flaky test in pkg/queue
	// offline: true kinds: [strategy]
}

// A strategy places a marker where it summarizes what the marker stands
// for, and AppendMarkers lists the ones it did not place.
func ExampleAppendMarkers() {
	req := &abi.SummarizeRequest{Markers: []abi.Marker{
		{Ref: "s-0a1b2c3d4e5f6a7b8c9d", Kind: abi.MarkerSpan, Bytes: 52000},
		{Ref: "t-00112233aabbccdd", Kind: abi.MarkerToolOutput, ToolName: "Bash", Bytes: 8192},
	}}
	summary := "Ran the test suite: 3 failures in auth " + req.Markers[1].Text() + "."
	fmt.Println(sdk.AppendMarkers(summary, req.Markers))
	// Output:
	// Ran the test suite: 3 failures in auth [recall:t-00112233aabbccdd].
	//
	// ## Recall
	// - [recall:s-0a1b2c3d4e5f6a7b8c9d] the folded messages (52000 bytes)
}
