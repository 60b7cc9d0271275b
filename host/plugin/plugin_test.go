package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
)

var smallSession = &abi.SummarizeRequest{
	Kind: abi.FoldHistory,
	Messages: []abi.Message{
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Fix the failing test in parser.go"}}},
		{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "I changed parser.go to handle empty input."}}},
	},
	FileOps:      abi.FileOps{Modified: []string{"parser.go"}},
	TargetTokens: 200,
}

func TestThreeTransportsAgree(t *testing.T) {
	ctx := context.Background()
	wasm, err := OpenWasm(ctx, testplugWasm(t), "testplug.wasm", testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer wasm.Close()
	proc, err := StartProcess(ctx, Manifest{Command: build(t, "testplug", false, "-X main.hostile=yes")}, testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()

	var want string
	for _, p := range []*Plugin{wasm, proc} {
		resp, err := p.Summarize(ctx, nil, smallSession)
		if err != nil {
			t.Fatalf("%s: %v", p.Source(), err)
		}
		if !resp.Offline || !strings.Contains(resp.Summary, "parser.go") {
			t.Fatalf("%s: summary %+v", p.Source(), resp)
		}
		if want == "" {
			want = resp.Summary
		} else if resp.Summary != want {
			t.Fatalf("%s summary %q differs from %q", p.Source(), resp.Summary, want)
		}
		_, err = p.Truncate(ctx, nil, &abi.TruncateRequest{Category: "no-such-category", Content: []byte("x"), MaxTokens: 5})
		var abiErr *abi.Error
		if !errors.Is(err, ErrPluginError) || !errors.As(err, &abiErr) || abiErr.Code != abi.CodeUnsupported {
			t.Fatalf("%s: unknown category: err = %v, want ErrPluginError with code unsupported", p.Source(), err)
		}
	}
}

func TestErrorsNameThePlugin(t *testing.T) {
	p, err := OpenWasm(context.Background(), hostileWasm(t, "trap"), "/plugins/trap.wasm", testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "generic", Content: []byte("x"), MaxTokens: 1})
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != ErrTrap || pe.Plugin != "trap" || pe.Path != "/plugins/trap.wasm" || pe.Op != "truncate" {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(err.Error(), `plugin "trap" (/plugins/trap.wasm): truncate: plugin trapped`) {
		t.Fatalf("message = %q", err)
	}
}

func TestClosedPluginRefusesCalls(t *testing.T) {
	p, err := OpenWasm(context.Background(), hostileWasm(t, "mirror"), "", testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	_, err = p.Summarize(context.Background(), nil, smallSession)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}

func TestOpenDispatchesOnFileName(t *testing.T) {
	dir := t.TempDir()
	bin := build(t, "testplug", false, "-X main.hostile=yes")
	manifest := filepath.Join(dir, "tp"+ManifestSuffix)
	if err := os.WriteFile(manifest, []byte(`{"command": "`+bin+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Open(context.Background(), manifest, testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Source() != SourceProcess || p.Name() != "testplug" {
		t.Fatalf("opened %s %q", p.Source(), p.Name())
	}
	_, err = Open(context.Background(), filepath.Join(dir, "notes.txt"), testOptions(t, nil))
	if !errors.Is(err, ErrInvalidPlugin) {
		t.Fatalf("err = %v, want ErrInvalidPlugin", err)
	}
}

func TestHandshakeFailureIsBounded(t *testing.T) {
	opts := testOptions(t, nil)
	opts.HandshakeTimeout = 300 * time.Millisecond
	_, err := StartProcess(context.Background(), Manifest{Command: build(t, "nohandshake", false, "")}, opts)
	if !errors.Is(err, ErrHandshake) {
		t.Fatalf("err = %v, want ErrHandshake", err)
	}
}

// A wasm plugin that loops in its start code fails to load at the call
// timeout, even when the caller's context has no deadline.
func TestLoadOfALoopingPluginIsBounded(t *testing.T) {
	opts := testOptions(t, nil)
	opts.CallTimeout = 200 * time.Millisecond
	_, err := OpenWasm(context.Background(), hostileWasm(t, "initloop"), "initloop.wasm", opts)
	if !errors.Is(err, ErrDeadlineExceeded) || !strings.Contains(err.Error(), "initloop.wasm") {
		t.Fatalf("err = %v, want ErrDeadlineExceeded naming the file", err)
	}
}
