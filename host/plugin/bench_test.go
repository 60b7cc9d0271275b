package plugin

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin/testdata/testplug/plug"
)

// The benchmarks compare the three transports on the same plugin code
// (testdata/testplug). Targets, reported in RATIONALE.md: a warm no-op call
// within 2 µs over wasm and 300 µs over a process; a cold load of a Go-built
// wasm plugin with a warm compilation cache within 150 ms; a 10 MiB
// round trip within 20 ms over wasm and 60 ms over a process.
//
//	go test -run '^$' -bench . -benchtime 2s ./host/plugin/

// transports opens testplug on each transport.
func transports(b *testing.B) map[string]*Plugin {
	b.Helper()
	opts := Options{CacheDir: filepath.Join(buildDir, "cache"), MaxInstances: 1}
	wasm, err := OpenWasm(context.Background(), testplugWasm(b), "testplug.wasm", opts)
	if err != nil {
		b.Fatal(err)
	}
	proc, err := StartProcess(context.Background(), Manifest{Command: build(b, "testplug", false, "-X main.hostile=yes")}, opts)
	if err != nil {
		b.Fatal(err)
	}
	// mirror.wasm, hand-written WAT answering with the request, measures
	// the transport alone: no Go runtime, no JSON in the plugin.
	mirror, err := OpenWasm(context.Background(), hostileWasm(b, "mirror"), "mirror.wasm", opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { wasm.Close(); proc.Close(); mirror.Close() })
	return map[string]*Plugin{
		"inprocess": InProcess(plug.New("testplug", true), opts),
		"wasm":      wasm,
		"wasm-wat":  mirror,
		"process":   proc,
	}
}

func benchTruncate(b *testing.B, content []byte) {
	ps := transports(b)
	req := &abi.TruncateRequest{Category: "noop", Content: content, MaxTokens: len(content)}
	for _, name := range []string{"inprocess", "wasm", "wasm-wat", "process"} {
		p := ps[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(content)))
			for b.Loop() {
				resp, err := p.Truncate(context.Background(), nil, req)
				if err != nil {
					b.Fatal(err)
				}
				if len(resp.Content) != len(content) {
					b.Fatalf("got %d bytes back", len(resp.Content))
				}
			}
		})
	}
}

// BenchmarkNoopCall is a warm call that does nothing: the fixed cost of
// each transport.
func BenchmarkNoopCall(b *testing.B) { benchTruncate(b, []byte("ok")) }

// BenchmarkRoundTrip10MiB sends a 10 MiB tool output and gets it back.
func BenchmarkRoundTrip10MiB(b *testing.B) {
	benchTruncate(b, bytes.Repeat([]byte("0123456789 abcdef ghijk\n"), 10<<20/24))
}

// BenchmarkColdLoad loads a Go-built wasm plugin (compile or cache read,
// instantiation, _initialize, info) and closes it.
func BenchmarkColdLoad(b *testing.B) {
	bin := testplugWasm(b)
	b.Run("warm-cache", func(b *testing.B) {
		dir := b.TempDir()
		warm, err := OpenWasm(context.Background(), bin, "", Options{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		warm.Close()
		for b.Loop() {
			p, err := OpenWasm(context.Background(), bin, "", Options{CacheDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			p.Close()
		}
	})
	b.Run("no-cache", func(b *testing.B) {
		for b.Loop() {
			p, err := OpenWasm(context.Background(), bin, "", Options{NoDiskCache: true})
			if err != nil {
				b.Fatal(err)
			}
			p.Close()
		}
	})
}
