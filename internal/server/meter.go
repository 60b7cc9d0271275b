package server

import (
	"context"
	"sync"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
)

// Meter is a host.ModelClient that counts the calls made through it,
// failed ones included, and adds up their usage and cost. The engine's
// compaction event covers only the strategy that succeeded; a report must
// also count the calls of the strategies that failed before it. The CLI
// and the API report the same figures from it. It is safe for concurrent
// use.
type Meter struct {
	next host.ModelClient
	// OnCall, when set, is called as call n starts (1 for the first).
	OnCall func(n int)

	mu    sync.Mutex
	stats ModelStats
}

// ModelStats are the model calls of one command or request.
type ModelStats struct {
	Calls  int       `json:"model_calls"`
	Failed int       `json:"model_calls_failed,omitempty"`
	Usage  abi.Usage `json:"model_usage"`
	// CostUSD prices Usage with the catalog's figures for the model;
	// 0 for a model the catalog does not price.
	CostUSD float64 `json:"cost_usd"`
}

// NewMeter meters next.
func NewMeter(next host.ModelClient) *Meter { return &Meter{next: next} }

// Model is the model next asks for.
func (m *Meter) Model() string { return m.next.Model() }

// Complete calls next and counts the call.
func (m *Meter) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	m.mu.Lock()
	m.stats.Calls++
	n := m.stats.Calls
	m.mu.Unlock()
	if m.OnCall != nil {
		m.OnCall(n)
	}
	resp, err := m.next.Complete(ctx, req)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.stats.Failed++
		return nil, err
	}
	u := resp.Usage
	m.stats.Usage.InputTokens += u.InputTokens
	m.stats.Usage.OutputTokens += u.OutputTokens
	m.stats.Usage.CacheReadTokens += u.CacheReadTokens
	m.stats.Usage.CacheWriteTokens += u.CacheWriteTokens
	name := resp.Model
	if name == "" {
		name = m.next.Model()
	}
	if c, ok := catalog.Lookup(name); ok {
		m.stats.CostUSD += cost.FromUsage(u).USD(c.Prices())
	}
	return resp, nil
}

// Stats are the figures so far.
func (m *Meter) Stats() ModelStats {
	if m == nil {
		return ModelStats{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

var _ host.ModelClient = (*Meter)(nil)
