// Package sessionio is what the command line and the HTTP API share: a
// session file in any supported format read into an engine session, one
// compaction run the way both offer it, and the result written back.
package sessionio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"weak"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/host/formats"
)

// Input is a session read from a file or a request.
type Input struct {
	Session *host.Session
	Format  string
	// Log is true for compact-host's own session log, whose compactions
	// the engine replayed.
	Log bool
	// PendingTail is true when the last assistant message's tool calls
	// still wait for their results (the agent is running them).
	PendingTail bool
	// Skipped and Repaired are the importer's counts; nil when empty.
	Skipped, Repaired map[string]int
	// Warnings are things the caller should pass on: a torn last line,
	// an agent's own compactions.
	Warnings []string
	// FullHistory is true when the session holds the file's full history
	// (ReadOptions.FullHistory), not the live context.
	FullHistory bool
	// HistoryTokens and HistoryMessages are the size of the full history,
	// the same as the context's when nothing in the file was compacted.
	HistoryTokens, HistoryMessages int
	// Compactions are those recorded in an agent's file, the agent's and
	// ours, in order.
	Compactions []FileCompaction
	// Subagents are the subagents' conversations, counted apart.
	Subagents []SubagentInfo
	// Overhead is what the agent adds to every request (system prompt,
	// tool schemas), when known.
	Overhead Overhead
	// Requests are the model calls the file records usage of, in order
	// (Claude Code and Codex files); nil when it records none.
	Requests []cost.Request
}

// ReadOptions choose how ReadWith reads a session.
type ReadOptions struct {
	// FullHistory reads every message an agent's file holds, as if none
	// had been compacted; by default the session is the live context,
	// what the agent sends when it resumes.
	FullHistory bool
	// AgentOverhead, above 0, is the agent's fixed overhead in tokens in
	// place of the one learned from the file or the catalog's default;
	// negative means none.
	AgentOverhead int
}

// FileCompaction is one compaction recorded in an agent's file.
type FileCompaction struct {
	// Line is the 1-based line of its first record; Bytes the size of
	// its records.
	Line, Bytes int
	// Ours is set for a compaction compact-host wrote.
	Ours bool
	// SummaryTokens is the size of its readable summary (0 when the agent
	// encrypted it); PreTokens what the agent reported before it.
	SummaryTokens, PreTokens int
}

// SubagentInfo is one subagent's conversation, counted apart.
type SubagentInfo struct {
	ID        string `json:"id"`
	ToolUseID string `json:"tool_use_id,omitempty"`
	Messages  int    `json:"messages"`
	Tokens    int    `json:"tokens"`
}

// Overhead sources.
const (
	// OverheadFile: learned from the usage the file records.
	OverheadFile = "file"
	// OverheadDefault: the catalog's default for the agent.
	OverheadDefault = "default"
	// OverheadFlag: given by the caller.
	OverheadFlag = "flag"
)

// Overhead is the agent's fixed overhead per request.
type Overhead struct {
	Tokens int
	// Source is OverheadFile, OverheadDefault, OverheadFlag, or "" when
	// unknown (the format is not an agent's file).
	Source string
	// At is the index into the context of the assistant message whose
	// usage it was learned from (OverheadFile); -1 when that message was
	// folded since, and the file's start told.
	At int
}

// InvalidError is a session that reads but breaks the providers' rules.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// Read reads data, named name in errors, in format ("" detects it) into a
// session of e. A malformed input is a *formats.ParseError naming name and
// the line (or an error wrapping host.ErrBadEntry for a session log); an
// undetectable one wraps formats.ErrUnknownFormat; an invalid one is an
// *InvalidError.
//
// An agent's file is read as its live context (see ReadWith).
func Read(e *host.Engine, name string, data []byte, format string) (*Input, error) {
	return ReadWith(e, name, data, format, ReadOptions{})
}

// ReadWith is Read with options. An agent's file (Claude Code, Codex) is
// read as the context the agent sends when it resumes: after its own
// compactions and those compact-host wrote into it; o.FullHistory reads
// the history before any of them.
func ReadWith(e *host.Engine, name string, data []byte, format string, o ReadOptions) (*Input, error) {
	in := &Input{FullHistory: o.FullHistory}
	if (format == "" || format == formats.Canonical) && host.IsSessionLog(data) {
		s, err := e.ReadSession(bytes.NewReader(data), name)
		if err != nil {
			return nil, err
		}
		in.Session, in.Format, in.Log = s, formats.Canonical, true
		if t := s.Torn(); t != nil {
			in.Warnings = append(in.Warnings, fmt.Sprintf("%s: %s; it was left out", name, t))
		}
	} else {
		sess, err := formats.Read(bytes.NewReader(data), format)
		var pe *formats.ParseError
		if errors.As(err, &pe) {
			pe.Path = name
		}
		switch {
		case err == nil:
		case errors.Is(err, formats.ErrTornLine) && sess != nil:
			in.Warnings = append(in.Warnings, fmt.Sprintf("%v; the %d messages before it were read", err, len(sess.Messages)))
		case pe != nil:
			return nil, err
		default:
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		in.Format, in.Skipped, in.Repaired = sess.Format, sess.Skipped, sess.Repaired
		msgs := sess.Live()
		if o.FullHistory {
			msgs = sess.Messages
		}
		in.Session = e.NewSession()
		if err := in.Session.Append(msgs...); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		in.HistoryMessages, in.HistoryTokens = len(sess.Messages), in.Session.ContextTokens()
		if len(sess.AgentCompactions) > 0 && !o.FullHistory {
			in.HistoryTokens = countMessages(e, sess.Messages)
		}
		describeFile(e, in, sess)
		in.Requests = billedRequests(in, name, sess)
		in.Overhead = overhead(e, sess, msgs, o)
		if sess.Request != nil {
			rememberRequest(in.Session, sess.Request)
		}
	}
	if len(in.Skipped) == 0 {
		in.Skipped = nil
	}
	if len(in.Repaired) == 0 {
		in.Repaired = nil
	}
	view := in.Session.Context()
	if err := host.Validate(view, false); err != nil {
		if host.Validate(view, true) != nil {
			return nil, &InvalidError{fmt.Errorf("%s: %w", name, err)}
		}
		in.PendingTail = true
	}
	return in, nil
}

// Options tune one compaction run.
type Options struct {
	// Focus is what the summary must keep, in the user's words.
	Focus string
	// RecallHint ends the summary with recall.Hint (host.CompactOptions).
	RecallHint bool
	// Threshold, when above 0, compacts only if the context uses at least
	// this share of the budget, as the agent's gate would.
	Threshold float64
	// DryRun works out the plan and changes nothing.
	DryRun bool
	// Overhead is what the agent adds to every request (Input.Overhead):
	// the tokens before and after count it, and the compaction leaves
	// room for it, so the agent's real request fits.
	Overhead int
	// Growth is what the conversation has shown of its pauses and growth
	// between model calls: under the cache-aware policy the compaction
	// keeps what host.Engine.KeepRecent chooses for it.
	Growth cost.Growth
}

// Actions an Outcome reports.
const (
	ActionPlan          = "plan"
	ActionNone          = "none"
	ActionNothingToFold = "nothing_to_fold"
	ActionCompacted     = "compacted"
)

// Outcome is what one run did.
type Outcome struct {
	// Action is ActionPlan, ActionNone, ActionNothingToFold,
	// ActionCompacted, or a gate action ("pruned", "emergency").
	Action                    string
	TokensBefore, TokensAfter int
	Fits                      bool
	Plan                      *host.Plan
	Compaction                *host.Compaction
}

// Compact runs one compaction of s: a plan with DryRun; nothing when the
// context is under Threshold; otherwise a manual compaction followed by a
// gate check, which prunes or takes the emergency path when the kept tail
// alone is still over the budget. Errors name the stage that failed.
func Compact(ctx context.Context, e *host.Engine, s *host.Session, o Options) (Outcome, error) {
	b := e.Budget()
	out := Outcome{TokensBefore: s.ContextTokens() + o.Overhead}
	switch {
	case o.DryRun:
		// Fits, as everywhere, is about the tokens after: those of the
		// plan, or the session as it is when nothing can be folded.
		out.TokensAfter = out.TokensBefore
		plan, err := e.Plan(s, host.CompactOptions{Focus: o.Focus, Overhead: o.Overhead})
		switch {
		case errors.Is(err, host.ErrNothingToFold):
			out.Action = ActionNothingToFold
		case err != nil:
			return out, fmt.Errorf("planning: %w", err)
		default:
			out.Action, out.Plan = ActionPlan, &plan
			out.TokensAfter = plan.TokensKept + plan.SummaryTokens + o.Overhead
		}
		out.Fits = out.TokensAfter <= b.Input
		return out, nil
	case o.Threshold > 0 && float64(out.TokensBefore) < o.Threshold*float64(b.Input):
		out.Action, out.TokensAfter, out.Fits = ActionNone, out.TokensBefore, out.TokensBefore <= b.Input
		return out, nil
	}
	keep := e.KeepRecent(s, host.Request{DynamicTokens: o.Overhead, Growth: o.Growth})
	c, err := e.Compact(ctx, s, host.CompactOptions{Focus: o.Focus, RecallHint: o.RecallHint, Overhead: o.Overhead, KeepRecentTokens: keep})
	switch {
	case errors.Is(err, host.ErrNothingToFold):
		out.Action = ActionNothingToFold
	case err != nil:
		return out, fmt.Errorf("the compaction: %w", err)
	default:
		out.Action, out.Compaction = ActionCompacted, &c
		if c.Emergency {
			out.Action = host.ActionEmergency.String()
		}
	}
	d, err := e.EnsureFits(ctx, s, host.Request{DynamicTokens: o.Overhead})
	if err != nil {
		return out, fmt.Errorf("the gate after the compaction: %w", err)
	}
	if d.Action > host.ActionNone && out.Action != ActionCompacted {
		out.Action = d.Action.String()
	}
	out.TokensAfter, out.Fits = d.TokensAfter, d.Fits
	return out, nil
}

// Writable are the formats Write writes.
var Writable = []string{formats.Canonical, formats.Anthropic, formats.OpenAI}

// OutputFormat is the format to write: the one asked for, else the
// input's where it can be written, else canonical (a session log).
func OutputFormat(asked, in string) string {
	if asked != "" {
		return asked
	}
	if in == formats.Anthropic || in == formats.OpenAI {
		return in
	}
	return formats.Canonical
}

// requests are the request bodies sessions were read from, so that Write
// puts a compaction back into the request it came from (model, tools,
// signatures and all). The key is weak: a session dropped by its caller
// takes its request with it.
var requests sync.Map // weak.Pointer[host.Session] -> *formats.Request

func rememberRequest(s *host.Session, r *formats.Request) {
	k := weak.Make(s)
	requests.Store(k, r)
	runtime.AddCleanup(s, func(k weak.Pointer[host.Session]) { requests.Delete(k) }, k)
}

// Write writes the session in format: the whole session log (every
// message and the compactions, so undoable) for canonical, the compacted
// request for anthropic and openai. A session read from a request of that
// format is written into that request: every field and message the
// compaction did not change keeps its bytes.
func Write(w io.Writer, s *host.Session, format string) error {
	switch format {
	case formats.Canonical:
		return s.WriteLog(w)
	case formats.Anthropic, formats.OpenAI:
		if r, ok := requests.Load(weak.Make(s)); ok && r.(*formats.Request).Format() == format {
			return r.(*formats.Request).Write(w, s.Context())
		}
		return formats.Write(w, format, s.Context())
	}
	return fmt.Errorf("output format %q: want %s", format, strings.Join(Writable, ", "))
}

// billedRequests is the usage the file records, which its reader read. A
// file whose usage cannot be read is still a session: the reason becomes
// a warning and the calls read before it are kept.
func billedRequests(in *Input, name string, sess *formats.Session) []cost.Request {
	reqs, err := sess.BilledRequests()
	if err != nil {
		in.Warnings = append(in.Warnings, fmt.Sprintf("%s: the recorded usage stops at %v; %d model calls were read", name, err, len(reqs)))
	}
	return reqs
}
