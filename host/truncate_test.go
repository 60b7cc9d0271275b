package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/plugins/truncate"
)

type truncatorFunc func(context.Context, plugin.Services, *abi.TruncateRequest) (*abi.TruncateResponse, error)

func (f truncatorFunc) Truncate(ctx context.Context, svc plugin.Services, req *abi.TruncateRequest) (*abi.TruncateResponse, error) {
	return f(ctx, svc, req)
}

func TestTruncateToolOutputByCategory(t *testing.T) {
	builtin := plugin.InProcess(truncate.New(), plugin.Options{})
	var asked []string
	e := newEngine(t, Config{ToolCategories: map[string]string{"my_search": "match-list"}},
		WithTruncatorResolver(func(category string) (Truncator, error) {
			asked = append(asked, category)
			return builtin, nil
		}))
	var events []*TruncationEvent
	e.Subscribe(func(ev Event) {
		if tr, ok := ev.(*TruncationEvent); ok {
			events = append(events, tr)
		}
	})
	small := []byte("ok\n")
	if got := e.TruncateToolOutput(ctx, "Bash", small, 100); string(got) != "ok\n" || len(asked) != 0 {
		t.Fatal("small output changed or truncator called")
	}
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, "line %d: building package\n", i)
	}
	out := e.TruncateToolOutput(ctx, "Bash", []byte(b.String()), 500)
	if e.CountTokens(string(out)) > 500 || !strings.HasPrefix(string(out), "line 0:") || !strings.Contains(string(out), "line 4999:") {
		t.Fatalf("head-tail output wrong: %d tokens\n%.300s", e.CountTokens(string(out)), out)
	}
	e.TruncateToolOutput(ctx, "my_search", []byte(b.String()), 500)
	e.TruncateToolOutput(ctx, "read_file", []byte(b.String()), 500)
	if strings.Join(asked, ",") != "head-tail,match-list,file-content" {
		t.Errorf("categories asked: %v", asked)
	}
	if len(events) != 3 || events[0].Category != "head-tail" || events[0].BytesAfter >= events[0].BytesBefore {
		t.Errorf("events %+v", events)
	}
}

func TestTruncateToolOutputFallsBackWhenTruncatorFails(t *testing.T) {
	e := newEngine(t, Config{}, WithTruncatorResolver(func(string) (Truncator, error) {
		return truncatorFunc(func(context.Context, plugin.Services, *abi.TruncateRequest) (*abi.TruncateResponse, error) {
			return nil, errors.New("trap")
		}), nil
	}))
	big := strings.Repeat("x", 40000) + "\n" + strings.Repeat("y", 40000)
	out := e.TruncateToolOutput(ctx, "Bash", []byte(big), 1000)
	if e.CountTokens(string(out)) > 1100 || !strings.Contains(string(out), "omitted") {
		t.Fatalf("fallback output: %d tokens", e.CountTokens(string(out)))
	}
}
