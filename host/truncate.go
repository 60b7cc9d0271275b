package host

import (
	"context"
	"fmt"
	"maps"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/truncate/category"
)

// Truncator shortens one tool output. Truncator plugins implement it.
type Truncator interface {
	Truncate(ctx context.Context, svc Services, req *abi.TruncateRequest) (*abi.TruncateResponse, error)
}

// TruncatorResolver finds the truncator for an output category.
type TruncatorResolver func(category string) (Truncator, error)

// WithTruncatorResolver sets where truncators are found.
func WithTruncatorResolver(r TruncatorResolver) Option {
	return func(e *Engine) { e.truncators = r }
}

// Plugins is where strategies and truncators are found by name and by
// output category. *plugin.Registry implements it (S and T are then
// *plugin.Plugin), so the engine reaches the plugin runtimes only through
// the registry the caller builds and never links them itself.
type Plugins[S Strategy, T Truncator] interface {
	Strategy(ctx context.Context, name string) (S, error)
	Truncator(ctx context.Context, category string) (T, error)
}

// WithPlugins resolves strategies and truncators from a plugin registry:
// inprocess.Builtins (the built-ins linked as Go code, no plugin runtime)
// or plugin.NewRegistry's (the built-ins, and the plugins of its watched
// directory, with the runtimes its Options wire in).
func WithPlugins[S Strategy, T Truncator](reg Plugins[S, T]) Option {
	return func(e *Engine) {
		e.resolve = func(name string) (Strategy, error) {
			p, err := reg.Strategy(context.Background(), name)
			if err != nil {
				return nil, err
			}
			return p, nil
		}
		e.truncators = func(category string) (Truncator, error) {
			p, err := reg.Truncator(context.Background(), category)
			if err != nil {
				return nil, err
			}
			return p, nil
		}
	}
}

// ToolCategory is the output category of a tool per the engine's
// configuration: Config.ToolCategories over the defaults of common agents.
func (e *Engine) ToolCategory(tool string) string {
	return category.For(e.categories, tool)
}

// TruncateToolOutput caps a tool's output before it enters the session:
// an output within maxTokens (0: Config.ToolOutputTokens) comes back as it
// is; a longer one goes through its category's truncator, which ends the
// cut with a notice of what was omitted. If the truncator fails, the
// engine cuts head and tail itself, so the call never fails.
func (e *Engine) TruncateToolOutput(ctx context.Context, tool string, output []byte, maxTokens int) []byte {
	return e.TruncateOutput(ctx, e.ToolCategory(tool), tool, output, maxTokens)
}

// TruncateOutput is TruncateToolOutput with the category given outright.
func (e *Engine) TruncateOutput(ctx context.Context, category, tool string, output []byte, maxTokens int) []byte {
	if maxTokens <= 0 {
		maxTokens = e.cfg.ToolOutputTokens
	}
	// A token is at least one byte; most outputs are decided here.
	if len(output) <= maxTokens || e.counter.Count(string(output)) <= maxTokens {
		return output
	}
	out, err := e.truncateWith(ctx, category, tool, output, maxTokens)
	if err != nil {
		e.log.Warn("truncator failed; cutting head and tail", "tool", tool, "category", category, "err", err)
		out = []byte(headTail(string(output), maxTokens*3))
	}
	e.events.emit(&TruncationEvent{Tool: tool, Category: category, BytesBefore: len(output), BytesAfter: len(out)})
	return out
}

func (e *Engine) truncateWith(ctx context.Context, category, tool string, output []byte, maxTokens int) ([]byte, error) {
	if e.truncators == nil {
		return nil, fmt.Errorf("no truncator source configured")
	}
	t, err := e.truncators(category)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, e.cfg.StrategyTimeout)
	defer cancel()
	resp, err := t.Truncate(cctx, &services{e: e}, &abi.TruncateRequest{Category: category, ToolName: tool, Content: output, MaxTokens: maxTokens})
	if err != nil {
		return nil, err
	}
	if n := e.counter.Count(string(resp.Content)); n > maxTokens*11/10 {
		return nil, fmt.Errorf("truncator returned %d tokens for a cap of %d", n, maxTokens)
	}
	return resp.Content, nil
}

func mergeCategories(over map[string]string) map[string]string {
	if len(over) == 0 {
		return nil // CategoryFor's defaults
	}
	m := maps.Clone(category.Defaults)
	maps.Copy(m, over)
	return m
}
