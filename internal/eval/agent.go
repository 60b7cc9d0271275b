package eval

import (
	"context"
	"io"
	"log/slog"
	"sync"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
)

// AgentComparison sets one compaction an agent made itself against the
// strategies' compaction of the same folded span, messages [0, FirstKept).
type AgentComparison struct {
	Session      string `json:"session"`
	CompactionID string `json:"compaction_id"`
	Trigger      string `json:"trigger,omitempty"`
	FirstKept    int    `json:"first_kept"`
	// Window is the context window of our engines: the largest replayed.
	Window int `json:"window"`
	// AgentText says what the agent's side is: "summary", or
	// "replacement history" when the summary is encrypted or empty.
	AgentText   string `json:"agent_text"`
	AgentTokens int    `json:"agent_tokens"` // chars/4
	Agent       Recall `json:"agent"`
	// RequestFolded says the span holds a user request; AgentRetained
	// that the agent's text carries the latest one.
	RequestFolded bool            `json:"request_folded"`
	AgentRetained bool            `json:"agent_retained"`
	Ours          []OurCompaction `json:"ours"`
}

// OurCompaction is a strategy's compaction of an agent's folded span,
// through the engine (Engine.Compact, so with the host's verification).
type OurCompaction struct {
	Strategy string `json:"strategy"`
	// Folded is the messages the engine folded; FirstKept unless the
	// span could not be cut there.
	Folded   int    `json:"folded"`
	Tokens   int    `json:"tokens"` // chars/4 of the summary
	Recall   Recall `json:"recall"`
	Retained bool   `json:"retained"`
	// StrategyRecall is the recall of what the strategy returned, before
	// the host added what it missed.
	StrategyRecall Recall `json:"strategy_recall"`
	Offline        bool   `json:"offline"`
	Err            string `json:"error,omitempty"`
}

// compareAgent compacts the span the agent folded with each strategy. The
// engine gets a session of exactly the folded messages and one short
// message after them, and keeps only that message, so its cut falls where
// the agent's did. Recall is measured on the summary alone on both sides.
func compareAgent(ctx context.Context, opts Options, s *formats.Session, name string, ci, window int,
	impls map[string]host.Strategy, names []string) AgentComparison {
	ac := s.AgentCompactions[ci]
	span := s.Messages[:ac.FirstKept]
	cmp := AgentComparison{Session: name, CompactionID: ac.ID, Trigger: ac.Trigger, FirstKept: ac.FirstKept, Window: window, AgentText: "summary"}
	agentMsgs := agentContext(ac)
	if ac.Summary == "" {
		cmp.AgentText = "replacement history"
	}
	agentText := ContextText(agentMsgs)
	cmp.AgentTokens = (len([]rune(agentText)) + 3) / 4
	ops := newFoldedOps(s.Messages).before(ac.FirstKept)
	cmp.Agent = ArtifactRecall(ops, agentText)
	req, hasReq := latestRequest(span, textActions(s))
	cmp.RequestFolded = hasReq
	cmp.AgentRetained = hasReq && Retained(req, agentText)

	for _, strategy := range names {
		ours := OurCompaction{Strategy: strategy, Offline: opts.Model == nil}
		rec := &recorder{inner: impls[strategy]}
		hopts := []host.Option{host.WithStrategy(strategy, rec), host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
		if opts.Model != nil {
			hopts = append(hopts, host.WithModel(opts.Model))
		}
		eng, err := host.New(host.Config{ContextWindow: window, Strategy: strategy, Fallbacks: []string{}, MinKeepMessages: 1}, hopts...)
		if err != nil {
			ours.Err = err.Error()
			cmp.Ours = append(cmp.Ours, ours)
			continue
		}
		sess := eng.NewSession()
		sess.Append(span...)
		// An assistant message, not a user one: a request after the span
		// would make the folded request look superseded to the engine.
		sess.Append(abi.Message{ID: "eval-next", Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "Continuing."}}})
		c, err := eng.Compact(ctx, sess, host.CompactOptions{KeepRecentTokens: 1})
		if err != nil {
			ours.Err = err.Error()
			cmp.Ours = append(cmp.Ours, ours)
			continue
		}
		ours.Folded = c.MessagesFolded
		ours.Offline = c.Offline
		ours.Tokens = (len([]rune(c.Summary)) + 3) / 4
		ours.Recall = ArtifactRecall(ops, c.Summary)
		ours.Retained = hasReq && Retained(req, c.Summary)
		ours.StrategyRecall = ArtifactRecall(ops, rec.last())
		if c.Emergency {
			ours.Err = "the strategy failed; the emergency path compacted"
		}
		cmp.Ours = append(cmp.Ours, ours)
	}
	return cmp
}

// recorder keeps the summary a strategy last returned.
type recorder struct {
	inner   host.Strategy
	mu      sync.Mutex
	summary string
}

func (r *recorder) Summarize(ctx context.Context, svc plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	resp, err := r.inner.Summarize(ctx, svc, req)
	if err == nil && req.Kind == abi.FoldHistory {
		r.mu.Lock()
		r.summary = resp.Summary
		r.mu.Unlock()
	}
	return resp, err
}

func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.summary
}
