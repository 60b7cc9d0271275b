package pluginapi

import (
	"context"
	"errors"
	"testing"

	"github.com/compact-host/compact-host/abi"
)

// FuzzServeHostCall feeds the host side of host calls arbitrary requests:
// the answer is always a frame that decodes to the operation's response
// or to an *abi.Error.
func FuzzServeHostCall(f *testing.F) {
	complete, _ := abi.Encode(&abi.CompleteRequest{System: "s", Messages: []abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "hi"}}}}})
	count, _ := abi.Encode(&abi.CountTokensRequest{Text: "hello"})
	f.Add(uint32(abi.OpComplete), complete)
	f.Add(uint32(abi.OpCountTokens), count)
	f.Add(uint32(abi.OpCountTokens), complete)
	f.Add(uint32(99), count)
	f.Add(uint32(abi.OpComplete), []byte("CHF\x01garbage"))
	f.Fuzz(func(t *testing.T, op uint32, frame []byte) {
		out := ServeHostCall(context.Background(), Offline{}, op, frame)
		var err error
		switch op {
		case abi.OpCountTokens:
			err = abi.Decode(out, &abi.CountTokensResponse{})
		default:
			err = abi.Decode(out, &abi.CompleteResponse{})
		}
		var abiErr *abi.Error
		if err != nil && !errors.As(err, &abiErr) {
			t.Fatalf("answer is not a frame: %v", err)
		}
	})
}
