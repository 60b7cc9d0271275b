// Package examples_test runs the conformance kit (host/plugintest) over the
// example plugins of every SDK, as `make verify-examples` does with the
// CLI, and measures each language's module size and the cost of a call
// that does no work.
package examples_test

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/examples/internal/pygrpc"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/host/plugintest"
)

// example is one plugin of one SDK: a committed .wasm, or a process
// plugin's manifest. The wasm modules are built by `make examples`.
type example struct {
	lang string
	path string
	// size is the file a user installs: the module, or the executable.
	size string
	// benchOnly marks the Go SDK's built-ins, measured for comparison:
	// host/plugin's TestRegistryBuiltinsConform already checks them.
	benchOnly bool
}

var examples = []example{
	{lang: "c", path: "c-truncator/logdedup.wasm"},
	{lang: "c", path: "c-strategy/outline.wasm"},
	{lang: "assemblyscript", path: "assemblyscript/headtail.wasm"},
	{lang: "assemblyscript", path: "assemblyscript/digest.wasm"},
	{lang: "python", path: "python/loglines.plugin.json", size: "python/loglines.py"},
	{lang: "python", path: "python/recap.plugin.json", size: "python/recap.py"},
	// The Go SDK's own: a built-in compiled to wasm, and a process plugin.
	{lang: "go-wasm", path: "../host/internal/builtin/wasm/truncate.wasm", benchOnly: true},
	{lang: "go-wasm", path: "../host/internal/builtin/wasm/narrative.wasm", benchOnly: true},
}

func open(tb testing.TB, path string) *plugin.Plugin {
	tb.Helper()
	if strings.HasPrefix(path, "python/") {
		pygrpc.Require(tb)
	}
	p, err := plugin.Open(context.Background(), path, plugin.Options{Wasm: wasm.Runtime, Process: process.Runtime, NoDiskCache: true})
	require.NoError(tb, err, "open %s (make examples builds the example plugins)", path)
	tb.Cleanup(func() { p.Close() })
	return p
}

// goProcess builds the Go process example (bullet) into a fresh
// directory with its manifest, as a user installs it.
func goProcess(tb testing.TB) example {
	tb.Helper()
	dir := tb.TempDir()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(gobin, "build", "-o", filepath.Join(dir, "bullet"), "./process-strategy").CombinedOutput()
	require.NoError(tb, err, "go build: %s", out)
	manifest := filepath.Join(dir, "bullet.plugin.json")
	require.NoError(tb, os.WriteFile(manifest, []byte(`{"command": "./bullet"}`), 0o644))
	return example{lang: "go-process", path: manifest, size: filepath.Join(dir, "bullet")}
}

func all(tb testing.TB) []example {
	if testing.Short() {
		return examples
	}
	return append(examples[:len(examples):len(examples)], goProcess(tb))
}

func TestEverySDKConforms(t *testing.T) {
	for _, e := range all(t) {
		if e.benchOnly {
			continue
		}
		t.Run(e.lang+"/"+filepath.Base(e.path), func(t *testing.T) {
			plugintest.Run(t, open(t, e.path))
		})
	}
}

// BenchmarkNoopCall measures one call that does no work, through the
// host's loader as the engine makes it: a truncation of a short output
// that fits (returned unchanged), or an offline summary of one message.
// module-bytes is the size of what a user installs.
//
//	go test -run '^$' -bench NoopCall ./examples/
func BenchmarkNoopCall(b *testing.B) {
	ctx := context.Background()
	short := &abi.TruncateRequest{Content: []byte("short output\n"), MaxTokens: 100}
	one := &abi.SummarizeRequest{Kind: abi.FoldHistory, TargetTokens: 100, Messages: []abi.Message{
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Add a --dry-run flag."}}},
	}}
	for _, e := range all(b) {
		p := open(b, e.path)
		sizePath := e.path
		if e.size != "" {
			sizePath = e.size
		}
		st, err := os.Stat(sizePath)
		require.NoError(b, err)
		info := p.Info()
		b.Run(e.lang+"/"+info.Name, func(b *testing.B) {
			call := func() error {
				_, err := p.Summarize(ctx, nil, one)
				return err
			}
			if info.Has(abi.KindTruncator) {
				req := *short
				req.Category = info.Categories[0]
				call = func() error {
					_, err := p.Truncate(ctx, nil, &req)
					return err
				}
			}
			require.NoError(b, call())
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(st.Size()), "module-bytes")
		})
	}
}

// frame lays out a frame by hand, so that a test can write the ones the
// abi package refuses to.
func frame(header string, blobs ...string) []byte {
	out := binary.LittleEndian.AppendUint32([]byte("CHF\x01"), uint32(len(header)))
	out = append(out, header...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(blobs)))
	for _, b := range blobs {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out
}

// malformed are frames whose layout is right but whose documents are not,
// or whose layout is wrong in ways the conformance kit does not try.
func malformed(category string) map[string][]byte {
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	cutShort := frame(`{"body":{}}`, "x")
	return map[string][]byte{
		"blob reference past the blobs": frame(`{"body":{"category":"`+category+`","content":3,"max_tokens":10,`+
			`"messages":[{"role":"user","content":[{"type":"text","text":3}]}],"previous_summary":3}}`, "x"),
		"blob reference not a number":   frame(`{"body":{"category":"`+category+`","content":"zero","max_tokens":10,"previous_summary":"zero"}}`, "x"),
		"header not JSON":               frame(`{"body":{"category":`),
		"header neither body nor error": frame(`{"other":{}}`),
		"body and error":                frame(`{"body":{},"error":{"code":"internal","message":"x"}}`),
		"an error frame as request":     frame(`{"error":{"code":"internal","message":"x"}}`),
		"nesting 5000 deep":             frame(`{"body":` + deep + `}`),
		"trailing bytes":                append(frame(`{"body":{}}`), 0),
		"blob past the end":             cutShort[:len(cutShort)-1],
	}
}

// TestEverySDKRefusesMalformedRequests checks that each SDK answers
// invalid_request to a malformed request (never a trap or a crash) and
// keeps working after.
func TestEverySDKRefusesMalformedRequests(t *testing.T) {
	for _, e := range examples {
		if e.benchOnly {
			continue
		}
		t.Run(e.lang+"/"+filepath.Base(e.path), func(t *testing.T) {
			p := open(t, e.path)
			info := p.Info()
			export, category := abi.ExportSummarize, ""
			if info.Has(abi.KindTruncator) {
				export, category = abi.ExportTruncate, info.Categories[0]
			}
			for name, f := range malformed(category) {
				out, err := p.CallFrame(context.Background(), nil, export, f)
				require.NoError(t, err, name)
				var abiErr *abi.Error
				if assert.ErrorAs(t, abi.Decode(out, &abi.TruncateResponse{}), &abiErr, "%s: answer %q", name, out) {
					assert.Equal(t, abi.CodeInvalidRequest, abiErr.Code, "%s: %s", name, abiErr.Message)
				}
			}
			_, err := p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: category, Content: []byte("ok\n"), MaxTokens: 10})
			if info.Has(abi.KindStrategy) {
				_, err = p.Summarize(context.Background(), nil, &abi.SummarizeRequest{Kind: abi.FoldHistory})
			}
			assert.NoError(t, err, "a call after the malformed ones")
		})
	}
}

// TestEveryTruncatorFitsTinyCaps gives each truncator caps smaller than
// any notice it could write: the output must still fit (the conformance
// kit tries 200 and 2,000 tokens).
func TestEveryTruncatorFitsTinyCaps(t *testing.T) {
	content := []byte(strings.Repeat("error: a line of a failing build ✗\n", 200))
	for _, e := range examples {
		if e.benchOnly {
			continue
		}
		t.Run(e.lang+"/"+filepath.Base(e.path), func(t *testing.T) {
			p := open(t, e.path)
			info := p.Info()
			if !info.Has(abi.KindTruncator) {
				t.Skip("not a truncator")
			}
			for _, maxTokens := range []int{1, 3, 10, 30} {
				resp, err := p.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: info.Categories[0], Content: content, MaxTokens: maxTokens})
				require.NoError(t, err, "max_tokens %d", maxTokens)
				assert.LessOrEqual(t, len(resp.Content), 4*maxTokens, "max_tokens %d: %q", maxTokens, resp.Content)
				assert.True(t, utf8.Valid(resp.Content), "max_tokens %d", maxTokens)
				assert.True(t, resp.Truncated, "max_tokens %d", maxTokens)
			}
		})
	}
}

// TestEveryStrategyKeepsToItsTarget: the example strategies count their
// offline summary with the host's tokenizer (the count_tokens host call
// of each SDK) and cut it to the target.
func TestEveryStrategyKeepsToItsTarget(t *testing.T) {
	req := &abi.SummarizeRequest{
		Kind: abi.FoldHistory,
		Messages: []abi.Message{
			{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: strings.Repeat("Rename the config keys. ", 20)}}},
		},
		FileOps:      abi.FileOps{Modified: []string{"config.go", "config_test.go", "README.md"}},
		TargetTokens: 12,
	}
	counted := &countingServices{}
	for _, e := range examples {
		if e.benchOnly {
			continue
		}
		t.Run(e.lang+"/"+filepath.Base(e.path), func(t *testing.T) {
			p := open(t, e.path)
			if !p.Info().Has(abi.KindStrategy) {
				t.Skip("not a strategy")
			}
			before := counted.calls.Load()
			resp, err := p.Summarize(context.Background(), counted, req)
			require.NoError(t, err)
			assert.True(t, resp.Offline)
			assert.Equal(t, "- (offline: no model was available)\n", resp.Summary, "cut at the last line that fits 12 tokens")
			assert.Greater(t, counted.calls.Load(), before, "the strategy did not ask the host to count")

			req := *req
			req.TargetTokens = 1000
			resp, err = p.Summarize(context.Background(), counted, &req)
			require.NoError(t, err)
			assert.Contains(t, resp.Summary, "- Modified `README.md`\n", "a summary within the target is whole")
		})
	}
}

// countingServices is a host without a model that counts its token counts.
type countingServices struct {
	plugin.OfflineServices
	calls atomic.Int64
}

func (c *countingServices) CountTokens(ctx context.Context, text string) (int, error) {
	c.calls.Add(1)
	return c.OfflineServices.CountTokens(ctx, text)
}
