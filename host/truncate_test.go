package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.Equal(t, "ok\n", string(e.TruncateToolOutput(ctx, "Bash", small, 100)), "small output changed")
	require.Empty(t, asked, "truncator called for a small output")
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, "line %d: building package\n", i)
	}
	out := e.TruncateToolOutput(ctx, "Bash", []byte(b.String()), 500)
	require.LessOrEqual(t, e.CountTokens(string(out)), 500, "head-tail output too long")
	require.True(t, strings.HasPrefix(string(out), "line 0:"), "head-tail output lacks the head:\n%.300s", out)
	require.Contains(t, string(out), "line 4999:", "head-tail output lacks the tail")
	e.TruncateToolOutput(ctx, "my_search", []byte(b.String()), 500)
	e.TruncateToolOutput(ctx, "read_file", []byte(b.String()), 500)
	assert.Equal(t, []string{"head-tail", "match-list", "file-content"}, asked, "categories asked")
	if assert.Len(t, events, 3, "events %+v", events) {
		assert.Equal(t, "head-tail", events[0].Category)
		assert.Less(t, events[0].BytesAfter, events[0].BytesBefore)
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
	require.LessOrEqual(t, e.CountTokens(string(out)), 1100, "fallback output too long")
	require.Contains(t, string(out), "omitted", "fallback output lacks the notice")
}
