package plugin

import (
	"context"
	"errors"
	"testing"

	"github.com/compact-host/compact-host/abi"
)

// FuzzAnswer hands the host arbitrary answers through a real wasm module
// (mirror.wasm answers with the request bytes) and checks that decoding
// them never panics and fails only with a typed error.
func FuzzAnswer(f *testing.F) {
	for _, doc := range []any{
		&abi.SummarizeResponse{Summary: "ok", Offline: true},
		&abi.TruncateResponse{Content: []byte("héllo"), Truncated: true, OmittedBytes: 3},
		&abi.Info{ABIMajor: 1, Name: "x", Kinds: []string{abi.KindStrategy}},
		&abi.Error{Code: abi.CodeUnsupported, Message: "no"},
	} {
		b, err := abi.Encode(doc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("CHF\x01\xff\xff\xff\xff"))
	f.Add([]byte("CHF\x02\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte{})

	p, err := OpenWasm(context.Background(), hostileWasm(f, "mirror"), "mirror.wasm", withRuntimes(Options{NoDiskCache: true}))
	if err != nil {
		f.Fatal(err)
	}
	defer p.Close()
	f.Fuzz(func(t *testing.T, answer []byte) {
		for _, export := range []string{abi.ExportSummarize, abi.ExportTruncate} {
			out, err := p.rt.Call(context.Background(), OfflineServices{}, export, answer)
			if err != nil {
				t.Fatalf("mirror call failed: %v", err)
			}
			var docs = map[string]any{abi.ExportSummarize: &abi.SummarizeResponse{}, abi.ExportTruncate: &abi.TruncateResponse{}}
			for _, doc := range []any{docs[export], &abi.Info{}} {
				err := decodeAnswer("fuzz", out, doc)
				if err == nil {
					continue
				}
				var pe *Error
				if !errors.As(err, &pe) || (pe.Kind != ErrMalformedOutput && pe.Kind != ErrPluginError) {
					t.Fatalf("untyped error %T: %v", err, err)
				}
			}
		}
	})
}
