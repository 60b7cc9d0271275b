package eval

import (
	"context"
	"math"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
)

// Accounting compares the token estimates of the context before each
// reported call with the prompt tokens the session records for it (input +
// cache read + cache write).
type Accounting struct {
	Session string `json:"session"`
	Reports int    `json:"reports"`
	// Overhead is what the first report counts beyond the chars/4
	// estimate of the messages before the call: the system prompt and
	// tool schemas the transcript does not hold.
	Overhead int `json:"overhead"`
	// Chars is chars/4 of the messages; O200k the o200k tokenizer;
	// Calibrated the engine's calibrated chars/4 estimate with nothing
	// declared beyond the messages; CalibratedOverhead the same with
	// Overhead declared in every request (Request.ToolSchemaTokens).
	// Calibrated estimates use only the reports before the call.
	Chars              AbsError         `json:"chars"`
	O200k              AbsError         `json:"o200k"`
	Calibrated         AbsError         `json:"calibrated"`
	CalibratedOverhead AbsError         `json:"calibrated_overhead"`
	Calls              []AccountingCall `json:"calls"`
}

// AbsError is the mean absolute error in percent of the recorded figure:
// over every report, and over the reports after the third (once three
// have calibrated the engine).
type AbsError struct {
	All        float64 `json:"mae_pct"`
	N          int     `json:"n"`
	AfterThree float64 `json:"mae_after_three_pct"`
	NAfter     int     `json:"n_after_three"`
}

func (e *AbsError) add(report int, estimate, recorded int) {
	pct := 100 * math.Abs(float64(estimate-recorded)) / float64(recorded)
	e.All = (e.All*float64(e.N) + pct) / float64(e.N+1)
	e.N++
	if report > 3 {
		e.AfterThree = (e.AfterThree*float64(e.NAfter) + pct) / float64(e.NAfter+1)
		e.NAfter++
	}
}

// AccountingCall is one reported call.
type AccountingCall struct {
	Report             int     `json:"report"` // 1-based
	Message            int     `json:"message"`
	Recorded           int     `json:"recorded"`
	Chars              int     `json:"chars"`
	O200k              int     `json:"o200k"`
	Calibrated         int     `json:"calibrated"`
	CalibratedOverhead int     `json:"calibrated_overhead"`
	Factor             float64 `json:"factor"` // calibration factor used, overhead declared
}

// accounting is Accounting with what the replays and charts need.
type accounting struct {
	Accounting
	recorded, baseline []int
}

// usageTranslation turns a recorded report into what the provider would
// have counted for the replay's messages.
type usageTranslation struct {
	overhead int
	calls    map[int]agentCall // by message index
}

// agentCall is one reported call: the prompt tokens recorded, the chars/4
// estimate of the messages of the agent's context that the file holds,
// and hidden, the part of the recorded figure those messages do not
// account for (the system prompt and tool schemas; after one of the
// agent's own compactions also what it put in the context that the file
// does not show: an encrypted summary, files re-attached).
type agentCall struct{ recorded, estimate, hidden int }

// usageFor is the Usage to feed for the assistant message at index i when
// the replay sent `sent` tokens (chars/4) of messages, or nil.
func (t usageTranslation) usageFor(i, sent int, recorded *abi.Usage) *abi.Usage {
	c, ok := t.calls[i]
	if !ok || recorded == nil {
		return nil
	}
	own := c.recorded - c.hidden
	if own <= 0 || c.estimate <= 0 {
		return nil
	}
	return &abi.Usage{InputTokens: int(math.Round(float64(own) * float64(sent) / float64(c.estimate))), OutputTokens: recorded.OutputTokens}
}

// hiddenTracker works out agentCall.hidden. Until the agent compacts it
// is the first report's gap, and the reports measure the provider's ratio
// to chars/4 on contexts the file holds whole. After one of the agent's
// own compactions the file no longer holds the agent's context: Codex
// encrypts its summary, Claude Code re-attaches files and reminders that
// are not in the transcript. Any growth of a report beyond the messages
// the file holds, at the ratio measured before, is then hidden content.
// Taking it for messages instead scales the replay's context by the
// hidden part over a small estimate: 15k hidden tokens over a 500-token
// replacement history read thirty-fold, and with it came overflows and
// compaction storms the agent never had.
type hiddenTracker struct {
	hidden    int
	ratio     float64 // recorded less hidden over the estimate, before any compaction
	compacted bool
	started   bool
}

func (h *hiddenTracker) agentCompacted() { h.compacted = h.started }

// observe returns the hidden part of a report of recorded tokens for a
// context estimated at estimate; firstGap is the first report's gap.
func (h *hiddenTracker) observe(recorded, estimate, firstGap int) int {
	if !h.started {
		h.hidden, h.ratio, h.started = firstGap, 1, true
	}
	if h.compacted {
		// Never below the first gap: the system prompt did not shrink.
		return max(firstGap, recorded-int(math.Round(h.ratio*float64(estimate))))
	}
	if estimate > 0 && recorded > h.hidden {
		h.ratio = min(max(float64(recorded-h.hidden)/float64(estimate), 0.5), 3)
	}
	return h.hidden
}

// account walks the session as the agent had it (after one of its own
// compactions, the agent's context is its summary or replacement history
// and the messages after it) and measures each estimate against each
// report. Sessions without reports give an empty Accounting.
func account(ctx context.Context, s *formats.Session, name string) (accounting, usageTranslation) {
	acc := accounting{Accounting: Accounting{Session: name}}
	tr := usageTranslation{calls: map[int]agentCall{}}
	must := func(e *host.Engine, err error) *host.Engine {
		if err != nil {
			panic(err) // fixed, valid configurations
		}
		return e
	}
	const window = 100_000_000 // never compacts
	chars := must(host.New(host.Config{ContextWindow: window, Tokenizer: "chars", DisableCompaction: true}))
	calib := must(host.New(host.Config{ContextWindow: window, Tokenizer: "chars", DisableCompaction: true}))
	calibOver := must(host.New(host.Config{ContextWindow: window, Tokenizer: "chars", DisableCompaction: true}))
	exact := must(host.New(host.Config{ContextWindow: window, Tokenizer: "o200k", DisableCompaction: true}))
	baseline := chars.NewSession()

	var sc, so, sCal, sOver *host.Session
	reset := func(start []abi.Message) {
		sc, so, sCal, sOver = chars.NewSession(), exact.NewSession(), calib.NewSession(), calibOver.NewSession()
		for _, ss := range []*host.Session{sc, so, sCal, sOver} {
			ss.Append(start...)
		}
	}
	reset(nil)
	compactAt := map[int]formats.AgentCompaction{}
	for _, c := range s.AgentCompactions {
		compactAt[c.FirstKept] = c
	}
	points := gatePoints(s.Messages)
	pi := 0
	msgs := s.Messages
	var hidden hiddenTracker
	for i := 0; i <= len(msgs); i++ {
		if c, ok := compactAt[i]; ok && i > 0 {
			reset(agentContext(c))
			hidden.agentCompacted()
		}
		if pi < len(points) && points[pi] == i {
			pi++
			acc.baseline = append(acc.baseline, baseline.ContextTokens())
			acc.recorded = append(acc.recorded, 0)
		}
		if i == len(msgs) {
			break
		}
		m := msgs[i]
		if m.Role != abi.RoleAssistant || m.Usage == nil || m.Usage.PromptTokens() <= 0 {
			for _, ss := range []*host.Session{sc, so, sCal, sOver, baseline} {
				ss.Append(m)
			}
			continue
		}
		recorded := m.Usage.PromptTokens()
		acc.recorded[len(acc.recorded)-1] = recorded
		acc.Reports++
		call := AccountingCall{Report: acc.Reports, Message: i, Recorded: recorded, Chars: sc.ContextTokens(), O200k: so.ContextTokens()}
		if acc.Reports == 1 {
			acc.Overhead = max(0, recorded-call.Chars)
			tr.overhead = acc.Overhead
		}
		d, _ := calib.EnsureFits(ctx, sCal, host.Request{})
		call.Calibrated = d.TokensBefore
		call.Factor, _ = calibOver.Calibration()
		d, _ = calibOver.EnsureFits(ctx, sOver, host.Request{ToolSchemaTokens: acc.Overhead})
		call.CalibratedOverhead = d.TokensBefore
		acc.Calls = append(acc.Calls, call)
		tr.calls[i] = agentCall{recorded: recorded, estimate: call.Chars, hidden: hidden.observe(recorded, call.Chars, acc.Overhead)}

		acc.Chars.add(call.Report, call.Chars, recorded)
		acc.O200k.add(call.Report, call.O200k, recorded)
		acc.Calibrated.add(call.Report, call.Calibrated, recorded)
		if call.Report > 1 { // the first report is where Overhead was read
			acc.CalibratedOverhead.add(call.Report, call.CalibratedOverhead, recorded)
		}
		calib.AppendReply(sCal, m)
		calibOver.AppendReply(sOver, m)
		for _, ss := range []*host.Session{sc, so, baseline} {
			ss.Append(m)
		}
	}
	return acc, tr
}

// agentContext is what an agent's compaction put in place of the folded
// messages: its summary as a user message, or its replacement history.
func agentContext(c formats.AgentCompaction) []abi.Message {
	var out []abi.Message
	if c.Summary != "" {
		out = append(out, abi.Message{ID: "agent-summary-" + c.ID, Role: abi.RoleUser, Summary: true,
			Content: []abi.Block{{Type: abi.BlockText, Text: c.Summary}}})
	}
	return append(out, c.Replacement...)
}
