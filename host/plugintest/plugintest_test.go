package plugintest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/builtin"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/internal/testwasm"
	"github.com/compact-host/compact-host/sdk"
)

// headTail is a small well-behaved plugin written against the SDK, the way
// a plugin author's own test would use Run.
type headTail struct{}

func (headTail) Truncate(ctx context.Context, host sdk.Host, req *abi.TruncateRequest) (*abi.TruncateResponse, error) {
	n, err := host.CountTokens(ctx, string(req.Content))
	if err != nil {
		return nil, err
	}
	if n <= req.MaxTokens {
		return &abi.TruncateResponse{Content: req.Content}, nil
	}
	notice := "\n[… output cut …]\n"
	keep := max(req.MaxTokens*4-len(notice)-8, 0) / 2
	head, tail := req.Content[:keep], req.Content[len(req.Content)-keep:]
	for len(head) > 0 && !utf8.Valid(head) {
		head = head[:len(head)-1]
	}
	for len(tail) > 0 && !utf8.Valid(tail) {
		tail = tail[1:]
	}
	out := append(append(bytes.Clone(head), notice...), tail...)
	return &abi.TruncateResponse{Content: out, Truncated: true, OmittedBytes: len(req.Content) - len(head) - len(tail)}, nil
}

func (headTail) Summarize(ctx context.Context, host sdk.Host, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	return &abi.SummarizeResponse{Summary: fmt.Sprintf("%d messages folded; modified: %s", len(req.Messages), strings.Join(req.FileOps.Modified, ", ")), Offline: true}, nil
}

func TestInProcessPluginConforms(t *testing.T) {
	p := plugin.InProcess(&sdk.Plugin{Name: "headtail", Strategy: headTail{}, Truncator: headTail{}, Categories: []string{"head-tail"}}, plugin.Options{})
	Run(t, p)
}

// buildTestplug builds host/plugin/testdata/testplug without its hostile
// categories.
func buildTestplug(t *testing.T, wasm bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "testplug")
	args := []string{"build", "-o", out}
	if wasm {
		args = append(args, "-buildmode=c-shared")
	}
	cmd := exec.Command("go", append(args, "../plugin/testdata/testplug")...)
	cmd.Env = os.Environ()
	if wasm {
		cmd.Env = append(cmd.Env, "GOOS=wasip1", "GOARCH=wasm")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testplug: %v\n%s", err, b)
	}
	return out
}

// sharedCompiled is a cache directory of the test's own whose compiled
// modules are the machine's shared test cache (internal/testwasm).
func sharedCompiled(t *testing.T) string {
	t.Helper()
	dir, err := testwasm.ShareCompiled(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWasmAndProcessBuildsConform(t *testing.T) {
	opts := plugin.Options{Wasm: wasm.Runtime, Process: process.Runtime, CacheDir: sharedCompiled(t)}
	bin, err := os.ReadFile(buildTestplug(t, true))
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := plugin.OpenWasm(context.Background(), bin, "testplug.wasm", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer wasm.Close()
	proc, err := plugin.StartProcess(context.Background(), plugin.Manifest{Command: buildTestplug(t, false)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	for _, p := range []*plugin.Plugin{wasm, proc} {
		t.Run(string(p.Source()), func(t *testing.T) { Run(t, p) })
	}
}

func TestBuiltinsConform(t *testing.T) {
	names := builtin.Names()
	if len(names) == 0 {
		t.Skip("no built-in plugin is embedded yet (make plugins)")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			bin, _ := builtin.Wasm(name)
			p, err := plugin.OpenWasm(context.Background(), bin, "", plugin.Options{Wasm: wasm.Runtime, CacheDir: sharedCompiled(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			Run(t, p)
		})
	}
}

func TestVerifyReportsBrokenPlugins(t *testing.T) {
	for _, tc := range []struct {
		file string
		fail []string
	}{
		{"trap", []string{"kinds", "summarize/history", "summarize/turn_prefix", "truncate/generic", "truncate/unknown_category", "garbage_request", "concurrent"}},
		{"mirror", []string{"summarize/history", "truncate/generic", "truncate/unknown_category", "garbage_request"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			bin, err := os.ReadFile("../internal/wasmrt/testdata/" + tc.file + ".wasm")
			if err != nil {
				t.Fatal(err)
			}
			p, err := plugin.OpenWasm(context.Background(), bin, tc.file+".wasm", plugin.Options{Wasm: wasm.Runtime, NoDiskCache: true})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			r := Verify(context.Background(), p)
			if r.OK() {
				t.Fatal("a broken plugin passed")
			}
			failed := map[string]bool{}
			for _, c := range r.Failed() {
				failed[c.Name] = true
			}
			for _, name := range tc.fail {
				if !failed[name] {
					t.Errorf("check %s passed, want it to fail", name)
				}
			}
			var text strings.Builder
			r.WriteText(&text)
			if !strings.Contains(text.String(), "FAIL "+tc.fail[0]+":") || !strings.Contains(text.String(), "PASS info") {
				t.Errorf("report text:\n%s", text.String())
			}
		})
	}
}
