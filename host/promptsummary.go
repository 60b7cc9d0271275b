package host

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/tokens"
	"github.com/compact-host/compact-host/host/recall"
)

// StrategyCachedPrompt names, in compactions and events, a summary made
// by a PromptSummarizer: the conversation's own prompt, as the provider's
// cache holds it, resent to its own model with an instruction appended.
const StrategyCachedPrompt = "cached-prompt"

// PromptSummaryRequest is a compaction a PromptSummarizer may make the
// summary of.
type PromptSummaryRequest struct {
	// Summarize is what the strategies would be given, less the messages:
	// the summarizer sends the conversation's own. Its Kind is
	// abi.FoldTurnPrefix when the cut is inside a turn.
	Summarize abi.SummarizeRequest
	// FirstKept is the first message the compaction keeps: the summary
	// covers everything before it.
	FirstKept abi.Message
	// PromptTokens is the whole context before the compaction (the
	// request's overhead included); FoldedTokens what the folded messages
	// count, the input a strategy's call would send.
	PromptTokens, FoldedTokens int
}

// PromptSummary is a PromptSummarizer's answer.
type PromptSummary struct {
	Summary string
	// Model answered the call; Usage is what it reported.
	Model string
	Usage Usage
	// CostUSD is what the call was billed; 0 prices Usage with the
	// catalog's figures for Model.
	CostUSD float64
}

// PromptSummarizer asks for a compaction's summary before the strategies
// do, the way a proxy can: with the client's own request, whose prompt the
// provider's cache still holds, and an instruction appended. It returns
// nil and no error to leave the compaction to the strategies (the cache
// is cold, or the strategies' call costs less). An error, or a summary
// that fails the engine's checks, falls back to the strategies and then
// the emergency path, as a failed strategy does.
type PromptSummarizer func(ctx context.Context, req *PromptSummaryRequest) (*PromptSummary, error)

// WithPromptSummarizer sets the engine's PromptSummarizer. It is asked
// for every compaction the gate or an overflow makes; a compaction with
// CompactOptions.Strategy set goes to that strategy.
func WithPromptSummarizer(f PromptSummarizer) Option {
	return func(e *Engine) { e.promptSummarizer = f }
}

// errNoPromptSummary: the summarizer left the compaction to the
// strategies.
var errNoPromptSummary = errors.New("host: no prompt summary")

// promptSummary asks the engine's PromptSummarizer for the summary of p:
// the summary checked and completed as a strategy's is, or an error.
// Callers hold no lock.
func (e *Engine) promptSummary(ctx context.Context, s *Session, svc *services, p *plan, firstKept abi.Message, opts compactOptions) (string, error) {
	kind := abi.FoldHistory
	if len(p.prefix) > 0 {
		kind = abi.FoldTurnPrefix
	}
	folded := 0
	for _, msgs := range [][]Message{p.history, p.prefix} {
		for i := range msgs {
			folded += tokens.Message(e.counter, &msgs[i])
		}
	}
	cctx, cancel := context.WithTimeout(ctx, e.cfg.StrategyTimeout)
	defer cancel()
	ps, err := e.promptSummarizer(cctx, &PromptSummaryRequest{
		Summarize: abi.SummarizeRequest{Kind: kind, PreviousSummary: p.previous, FileOps: p.files, TargetTokens: p.target,
			Focus: opts.Focus, ModelAvailable: true, Markers: p.markers},
		FirstKept: firstKept, PromptTokens: p.before, FoldedTokens: e.calibrated(folded),
	})
	if ps != nil {
		// A call that answered is paid for, whatever it answered.
		svc.addCall(ps)
	}
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", StrategyCachedPrompt, err)
	case ps == nil:
		return "", errNoPromptSummary
	}
	if strings.TrimSpace(ps.Summary) == "" {
		return "", fmt.Errorf("%s: %w", StrategyCachedPrompt, ErrEmptySummary)
	}
	summary := e.verifySummary(ps.Summary, p)
	if opts.RecallHint {
		summary = recall.WithHint(summary)
	}
	if err := e.checkShrinks(StrategyCachedPrompt, summary, p); err != nil {
		return "", err
	}
	return summary, nil
}
