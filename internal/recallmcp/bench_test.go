package recallmcp_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/internal/recallmcp"
)

// BenchmarkRecallFromSessionFile is one recall call's work behind the MCP
// server on a 2,000-turn session file already read: a stat of the file
// (unchanged, so not read again) and the lookup of a tool output.
func BenchmarkRecallFromSessionFile(b *testing.B) {
	msgs, key := conversation("bench", 2000)
	path := filepath.Join(b.TempDir(), "session.json")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := formats.Write(f, formats.Canonical, msgs); err != nil {
		b.Fatal(err)
	}
	f.Close()
	src := &recallmcp.FileSource{Path: path}
	ctx := context.Background()
	if _, err := src.Index(ctx); err != nil {
		b.Fatal(err)
	}
	ref := key.ToolRef("call_1000")
	for b.Loop() {
		x, err := src.Index(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := x.Recall(ref, 1); err != nil {
			b.Fatal(err)
		}
	}
}
