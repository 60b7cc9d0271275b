package plugin

import (
	"context"
	"sync/atomic"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// Defaults of the limits on a plugin's model completions (Options).
const (
	DefaultMaxCompletionsPerCall = 16
	DefaultMaxCompletionTokens   = 32_000
)

// OutputLimiter is implemented by Services that know their model's limit
// on output tokens; a plugin's max_tokens is clamped to it.
type OutputLimiter interface {
	MaxOutputTokens() int
}

// callServices is the Services of one plugin call: the caller's, with
// the plugin's completions counted and their max_tokens clamped, since
// they are paid on the user's key.
type callServices struct {
	pluginapi.Services
	left      atomic.Int64
	limit     int
	maxTokens int
}

func (o Options) callServices(svc pluginapi.Services) *callServices {
	cs := &callServices{Services: svc, maxTokens: o.MaxCompletionTokens}
	if cs.maxTokens <= 0 {
		cs.maxTokens = DefaultMaxCompletionTokens
	}
	if l, ok := svc.(OutputLimiter); ok {
		if n := l.MaxOutputTokens(); n > 0 && n < cs.maxTokens {
			cs.maxTokens = n
		}
	}
	n := o.MaxCompletionsPerCall
	if n <= 0 {
		n = DefaultMaxCompletionsPerCall
	}
	cs.limit = n
	cs.left.Store(int64(n))
	return cs
}

// Complete implements Services.
func (s *callServices) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	if s.left.Add(-1) < 0 {
		return nil, abi.Errorf(abi.CodeModel, "plugin asked for more model completions in one call than the host allows (%d, plugin.Options.MaxCompletionsPerCall)", s.limit)
	}
	if req.MaxTokens <= 0 || req.MaxTokens > s.maxTokens {
		clamped := *req
		clamped.MaxTokens = s.maxTokens
		req = &clamped
	}
	return s.Services.Complete(ctx, req)
}
