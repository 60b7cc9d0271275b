// Package ctruncator holds the C truncator example; this test loads the
// committed logdedup.wasm through the host's plugin loader.
package ctruncator_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/wasm"
)

// logdedup.wasm is built from logdedup.c by `make examples`.
func open(t *testing.T) *plugin.Plugin {
	t.Helper()
	p, err := plugin.OpenWasmFile(context.Background(), "logdedup.wasm", plugin.Options{Wasm: wasm.Runtime, NoDiskCache: true})
	if err != nil {
		t.Fatalf("load logdedup.wasm: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func truncate(t *testing.T, p *plugin.Plugin, category string, content []byte, max int) (*abi.TruncateResponse, error) {
	t.Helper()
	return p.Truncate(context.Background(), plugin.OfflineServices{}, &abi.TruncateRequest{Category: category, ToolName: "Bash", Content: content, MaxTokens: max})
}

func TestInfo(t *testing.T) {
	info := open(t).Info()
	if info.Name != "logdedup" || info.ABIMajor != abi.Major || !info.Has(abi.KindTruncator) || info.Has(abi.KindStrategy) {
		t.Errorf("info %+v", info)
	}
	if len(info.Categories) != 1 || info.Categories[0] != "log" {
		t.Errorf("categories %v, want [log]", info.Categories)
	}
}

func TestCollapsesRepeatedLines(t *testing.T) {
	p := open(t)
	var in bytes.Buffer
	in.WriteString("starting server\n")
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&in, "2026-01-02T10:%02d:%02d retrying connection to db:5432 (attempt %d)\n", i/60, i%60, i)
	}
	for i := 0; i < 200; i++ {
		in.WriteString("WARN cache miss\n")
	}
	in.WriteString("fatal: giving up\n")
	resp, err := truncate(t, p, "log", in.Bytes(), 200)
	if err != nil {
		t.Fatal(err)
	}
	out := string(resp.Content)
	if len(out) > 200*4 {
		t.Errorf("%d bytes, over the cap", len(out))
	}
	for _, want := range []string{
		"starting server\n",
		"(attempt 0)\n[... 498 similar lines, differing only in numbers]\n",
		"(attempt 499)\n",
		"WARN cache miss\n[... the line above repeats 199 more times]\n",
		"fatal: giving up\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !resp.Truncated || resp.OmittedLines != 498+199 || resp.OmittedBytes <= 0 {
		t.Errorf("truncated=%v omitted %d lines %d bytes", resp.Truncated, resp.OmittedLines, resp.OmittedBytes)
	}
}

func TestCutsToCapWithNotice(t *testing.T) {
	p := open(t)
	var in bytes.Buffer
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&in, "line %d: %s\r\n", i, strings.Repeat("ü", i%7)) // distinct lines, CRLF
	}
	resp, err := truncate(t, p, "log", in.Bytes(), 100)
	if err != nil {
		t.Fatal(err)
	}
	out := resp.Content
	if len(out) > 400 {
		t.Errorf("%d bytes, over 100 tokens", len(out))
	}
	if !utf8.Valid(out) || bytes.Count(out, []byte("\r\n")) != bytes.Count(out, []byte("\n")) {
		t.Errorf("split UTF-8 or CRLF: %q", out)
	}
	if !bytes.Contains(out, []byte("omitted. Re-run with a narrower command")) || !bytes.HasPrefix(out, []byte("line 0: \r\n")) {
		t.Errorf("no notice or head lost: %q", out)
	}

	long := bytes.Repeat([]byte("日本語"), 1<<20/9)
	resp, err = truncate(t, p, "log", long, 50)
	if err != nil || len(resp.Content) > 200 || !utf8.Valid(resp.Content) {
		t.Fatalf("one long line: err %v, %d bytes, valid %v", err, len(resp.Content), utf8.Valid(resp.Content))
	}
}

func TestFitsUntouchedAndErrors(t *testing.T) {
	p := open(t)
	resp, err := truncate(t, p, "log", []byte("a\nb\n"), 100)
	if err != nil || resp.Truncated || string(resp.Content) != "a\nb\n" {
		t.Errorf("fitting output: %+v, %v", resp, err)
	}
	_, err = truncate(t, p, "head-tail", []byte("x"), 10)
	var e *abi.Error
	if !errors.As(err, &e) || e.Code != abi.CodeUnsupported {
		t.Errorf("other category: err = %v, want unsupported", err)
	}
}
