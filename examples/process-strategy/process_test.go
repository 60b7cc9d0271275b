package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
)

// TestAsProcessPlugin builds the plugin, drops it with its manifest into a
// plugins directory and runs it through the host's loader, as a user would.
func TestAsProcessPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	dir := t.TempDir()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(gobin, "build", "-o", filepath.Join(dir, "bullet"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	manifest, err := os.ReadFile("bullet.plugin.json")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bullet.plugin.json")
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := plugin.Open(context.Background(), path, plugin.Options{Process: process.Runtime, NoDiskCache: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer p.Close()
	if info := p.Info(); info.Name != "bullet" || !info.Has(abi.KindStrategy) || p.Source() != plugin.SourceProcess {
		t.Errorf("info %+v from %s", info, p.Source())
	}
	resp, err := p.Summarize(context.Background(), plugin.OfflineServices{}, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: session, ModelAvailable: true})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Offline || !strings.Contains(resp.Summary, "- Modified `README.md`") {
		t.Errorf("summary over the process transport:\n%s", resp.Summary)
	}
}
