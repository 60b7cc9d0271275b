package core

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/compact-host/compact-host/abi"
)

type echo struct{}

func (echo) Truncate(_ context.Context, host Host, req *abi.TruncateRequest) (*abi.TruncateResponse, error) {
	switch string(req.Content) {
	case "panic":
		panic("boom")
	case "nil":
		return nil, nil
	case "fail":
		return nil, errors.New("plain failure")
	case "count":
		n, err := host.CountTokens(context.Background(), "abcdefgh")
		if err != nil {
			return nil, err
		}
		return &abi.TruncateResponse{Content: []byte{byte(n)}}, nil
	}
	return &abi.TruncateResponse{Content: req.Content}, nil
}

func handle(t *testing.T, p *Plugin, host Host, export string, req any) ([]byte, error) {
	t.Helper()
	var frame []byte
	if req != nil {
		var err error
		if frame, err = abi.Encode(req); err != nil {
			t.Fatal(err)
		}
	}
	out := p.Handle(context.Background(), host, export, frame)
	var resp abi.TruncateResponse
	err := abi.Decode(out, &resp)
	return resp.Content, err
}

func code(err error) string {
	var e *abi.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestHandle(t *testing.T) {
	p := &Plugin{Name: "echo", Truncator: echo{}, Categories: []string{"generic"}}
	for _, tc := range []struct {
		name    string
		export  string
		req     any
		want    string
		errCode string
	}{
		{name: "echo", export: abi.ExportTruncate, req: &abi.TruncateRequest{Category: "generic", Content: []byte("hi")}, want: "hi"},
		{name: "undeclared category", export: abi.ExportTruncate, req: &abi.TruncateRequest{Category: "other", Content: []byte("hi")}, errCode: abi.CodeUnsupported},
		{name: "not a strategy", export: abi.ExportSummarize, req: &abi.SummarizeRequest{}, errCode: abi.CodeUnsupported},
		{name: "unknown export", export: "compact_v1_nope", errCode: abi.CodeUnsupported},
		{name: "garbage request", export: abi.ExportTruncate, errCode: abi.CodeInvalidRequest},
		{name: "error frame as request", export: abi.ExportTruncate, req: &abi.Error{Code: abi.CodeInternal, Message: "x"}, errCode: abi.CodeInvalidRequest},
		{name: "panic", export: abi.ExportTruncate, req: &abi.TruncateRequest{Category: "generic", Content: []byte("panic")}, errCode: abi.CodeInternal},
		{name: "nil answer", export: abi.ExportTruncate, req: &abi.TruncateRequest{Category: "generic", Content: []byte("nil")}, errCode: abi.CodeInternal},
		{name: "plain error", export: abi.ExportTruncate, req: &abi.TruncateRequest{Category: "generic", Content: []byte("fail")}, errCode: abi.CodeInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := handle(t, p, nil, tc.export, tc.req)
			if tc.errCode != "" {
				if code(err) != tc.errCode {
					t.Fatalf("err = %v, want code %s", err, tc.errCode)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestHandleInfo(t *testing.T) {
	p := &Plugin{Name: "echo", Version: "1.2.3", Truncator: echo{}, Categories: []string{"generic"}}
	var info abi.Info
	if err := abi.Decode(p.Handle(context.Background(), nil, abi.ExportInfo, nil), &info); err != nil {
		t.Fatal(err)
	}
	if info.ABIMajor != abi.Major || info.Name != "echo" || !info.Has(abi.KindTruncator) || info.Has(abi.KindStrategy) {
		t.Fatalf("info = %+v", info)
	}
}

// FrameHost carries host calls as frames, the way both transports do.
func TestFrameHost(t *testing.T) {
	var logged string
	host := &FrameHost{
		Call: func(_ context.Context, op uint32, frame []byte) ([]byte, error) {
			switch op {
			case abi.OpCountTokens:
				var req abi.CountTokensRequest
				if err := abi.Decode(frame, &req); err != nil {
					return nil, err
				}
				return abi.Encode(&abi.CountTokensResponse{Tokens: len(req.Text) / 2})
			default:
				return abi.Encode(&abi.Error{Code: abi.CodeNoModel, Message: "no model"})
			}
		},
		LogFunc: func(_ slog.Level, msg string) { logged = msg },
	}
	p := &Plugin{Name: "echo", Truncator: echo{}}
	got, err := handle(t, p, host, abi.ExportTruncate, &abi.TruncateRequest{Content: []byte("count")})
	if err != nil || len(got) != 1 || got[0] != 4 {
		t.Fatalf("count through the host: %v %v", got, err)
	}
	if _, err := host.Complete(context.Background(), &abi.CompleteRequest{}); code(err) != abi.CodeNoModel {
		t.Fatalf("Complete err = %v, want code %s", err, abi.CodeNoModel)
	}
	host.Log(slog.LevelInfo, "hello")
	if logged != "hello" {
		t.Fatalf("logged %q", logged)
	}
}
