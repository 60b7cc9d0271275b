package truncate_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/pluginstest"
	"github.com/compact-host/compact-host/plugins/truncate"
)

func run(t testing.TB, category string, content []byte, maxTokens int) *abi.TruncateResponse {
	t.Helper()
	resp, err := truncate.New().Truncator.Truncate(context.Background(), pluginstest.NoModel(), &abi.TruncateRequest{Category: category, Content: content, MaxTokens: maxTokens})
	if err != nil {
		t.Fatalf("Truncate(%s, %d bytes, %d tokens): %v", category, len(content), maxTokens, err)
	}
	return resp
}

// numbered returns n lines "line 1" … "line n", each ending with eol.
func numbered(n int, eol string) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d%s", i, eol)
	}
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	for _, cat := range truncate.Categories {
		t.Run(cat, func(t *testing.T) {
			resp := run(t, cat, numbered(500, "\n"), 150)
			pluginstest.Golden(t, "truncate-"+cat, resp.Content)
		})
	}
}

func TestFitsUntouched(t *testing.T) {
	in := numbered(10, "\n")
	for _, cat := range truncate.Categories {
		resp := run(t, cat, in, 1000)
		if resp.Truncated || !bytes.Equal(resp.Content, in) || resp.OmittedBytes != 0 {
			t.Errorf("%s: output that fits was changed: %+v", cat, resp)
		}
	}
}

func TestHeadTailLines(t *testing.T) {
	in := numbered(1000, "\n")
	resp := run(t, truncate.HeadTail, in, 1500) // 6000 bytes: room for all 100 lines
	out := string(resp.Content)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 101 {
		t.Fatalf("%d lines, want 60 + notice + 40:\n%s", len(lines), out)
	}
	if lines[0] != "line 1" || lines[59] != "line 60" || lines[61] != "line 961" || lines[100] != "line 1000" {
		t.Errorf("head/tail lines wrong: %q %q %q %q", lines[0], lines[59], lines[61], lines[100])
	}
	if !strings.Contains(lines[60], "900 of 1,000 lines") || !strings.Contains(lines[60], "re-run the command") {
		t.Errorf("notice %q", lines[60])
	}
	if resp.OmittedLines != 900 || resp.OmittedBytes != len(in)-len(numbered(60, "\n"))-(len(in)-bytes.Index(in, []byte("line 961\n"))) {
		t.Errorf("omitted %d lines %d bytes", resp.OmittedLines, resp.OmittedBytes)
	}
}

func TestFileContentNoticeSaysWhereToRead(t *testing.T) {
	resp := run(t, truncate.FileContent, numbered(1000, "\n"), 100)
	out := string(resp.Content)
	head := strings.SplitN(out, "\n[…", 2)[0]
	shown := strings.Count(head, "\n") + 1
	want := fmt.Sprintf("[… lines %d–", shown+1)
	if !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("starting at line %d.", shown+1)) {
		t.Errorf("notice does not name line %d:\n%s", shown+1, out)
	}
	if !strings.HasSuffix(out, "line 1000\n") {
		t.Error("file-content lost the end of the file")
	}
}

func TestMatchListKeepsLeadingMatches(t *testing.T) {
	in := pluginstest.GrepOutput(50_000)
	resp := run(t, truncate.MatchList, in, 500)
	out := resp.Content
	i := bytes.Index(out, []byte("[…"))
	if i <= 0 || !bytes.HasPrefix(in, out[:i]) {
		t.Fatal("match-list output does not start with the leading matches")
	}
	if !bytes.Contains(out, []byte("narrow the search")) {
		t.Errorf("notice lacks advice:\n%s", out[i:])
	}
}

func TestUnknownCategory(t *testing.T) {
	_, err := truncate.New().Truncator.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: "json-array", Content: []byte("x"), MaxTokens: 10})
	if e := abi.AsError(err); err == nil || e.Code != abi.CodeUnsupported {
		t.Errorf("err = %v, want unsupported", err)
	}
	_, err = truncate.New().Truncator.Truncate(context.Background(), nil, &abi.TruncateRequest{Category: truncate.Generic, Content: []byte("x"), MaxTokens: 0})
	if e := abi.AsError(err); err == nil || e.Code != abi.CodeInvalidRequest {
		t.Errorf("max_tokens 0: err = %v, want invalid_request", err)
	}
}

// check asserts the invariants every cut keeps.
func check(t *testing.T, name string, in []byte, maxTokens int, resp *abi.TruncateResponse) {
	t.Helper()
	out := resp.Content
	if len(out) > maxTokens*truncate.BytesPerToken {
		t.Errorf("%s: %d bytes over the cap of %d tokens (%d bytes)", name, len(out), maxTokens, maxTokens*truncate.BytesPerToken)
	}
	if len(in) <= maxTokens*truncate.BytesPerToken {
		if resp.Truncated || !bytes.Equal(out, in) {
			t.Errorf("%s: fitting input changed", name)
		}
		return
	}
	if !resp.Truncated {
		t.Errorf("%s: Truncated = false for a cut", name)
	}
	if utf8.Valid(in) && !utf8.Valid(out) {
		t.Errorf("%s: output splits a UTF-8 sequence", name)
	}
	if lf := bytes.Count(in, []byte("\n")); lf > 0 && bytes.Count(in, []byte("\r\n")) == lf && bytes.Count(out, []byte("\r\n")) != bytes.Count(out, []byte("\n")) {
		t.Errorf("%s: CRLF input gave a bare LF or a split CRLF: %q", name, clip(out))
	}
	if maxTokens >= 20 && !bytes.Contains(out, []byte("omitted")) {
		t.Errorf("%s: no omission notice in %q", name, clip(out))
	}
	if resp.OmittedBytes <= 0 || resp.OmittedBytes > len(in) {
		t.Errorf("%s: OmittedBytes = %d of %d", name, resp.OmittedBytes, len(in))
	}
}

func TestInvariants(t *testing.T) {
	inputs := map[string][]byte{
		"lines":           numbered(3000, "\n"),
		"crlf":            numbered(3000, "\r\n"),
		"no final eol":    bytes.TrimSuffix(numbered(3000, "\n"), []byte("\n")),
		"utf8":            bytes.Repeat([]byte("日本語のテキスト行—ünïcödé ✓\n"), 2000),
		"utf8 one line":   bytes.Repeat([]byte("日本語ü✓"), 20000),
		"crlf one line":   append(bytes.Repeat([]byte("a"), 100_000), "\r\n"...),
		"empty lines":     bytes.Repeat([]byte("\n"), 50_000),
		"shell":           pluginstest.ShellOutput(200_000),
		"file":            pluginstest.FileOutput(200_000),
		"invalid utf8":    bytes.Repeat([]byte{0xff, 'a', 0xc3, '\n'}, 10_000),
		"one long + tail": append(bytes.Repeat([]byte("x"), 300_000), numbered(50, "\n")...),
	}
	for name, in := range inputs {
		for _, cat := range truncate.Categories {
			for _, max := range []int{1, 3, 8, 20, 50, 200, 1000, 10_000, 1 << 20} {
				n := fmt.Sprintf("%s/%s/%d", name, cat, max)
				check(t, n, in, max, run(t, cat, in, max))
			}
		}
	}
}

func TestFiveMegabyteLine(t *testing.T) {
	in := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16)
	for _, cat := range truncate.Categories {
		resp := run(t, cat, in, 2000)
		check(t, cat, in, 2000, resp)
		if len(resp.Content) < 7000 {
			t.Errorf("%s: kept only %d of the 8000 bytes allowed", cat, len(resp.Content))
		}
	}
}

func FuzzTruncate(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), 1, uint8(0))
	f.Add(numbered(300, "\r\n"), 40, uint8(1))
	f.Add([]byte("日本語\n日本語\n日本語"), 2, uint8(2))
	f.Add(bytes.Repeat([]byte("x"), 1000), 30, uint8(3))
	f.Fuzz(func(t *testing.T, in []byte, max int, cat uint8) {
		if max <= 0 || max > 1<<20 {
			return
		}
		category := truncate.Categories[int(cat)%len(truncate.Categories)]
		check(t, category, in, max, run(t, category, in, max))
	})
}

func BenchmarkTruncate10MiB(b *testing.B) {
	inputs := map[string][]byte{
		truncate.HeadTail:    pluginstest.ShellOutput(10 << 20),
		truncate.MatchList:   pluginstest.GrepOutput(10 << 20),
		truncate.FileContent: pluginstest.FileOutput(10 << 20),
		truncate.Generic:     pluginstest.ShellOutput(10 << 20),
	}
	for _, cat := range truncate.Categories {
		in := inputs[cat]
		b.Run(cat, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				run(b, cat, in, 8000)
			}
		})
	}
}

// clip keeps failure messages short.
func clip(b []byte) string {
	if len(b) <= 300 {
		return string(b)
	}
	return string(b[:150]) + " … " + string(b[len(b)-150:])
}
