package sessionio

import (
	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/formats"
)

// countMessages is the context size of msgs as e counts it; messages a
// session refuses are counted block by block.
func countMessages(e *host.Engine, msgs []abi.Message) int {
	s := e.NewSession()
	if err := s.Append(msgs...); err == nil {
		return s.ContextTokens()
	}
	n := 0
	for i := range msgs {
		for _, b := range msgs[i].Content {
			n += e.CountTokens(b.Text) + e.CountTokens(string(b.Input))
		}
	}
	return n
}

// describeFile fills in the compactions and subagents of an agent's file.
func describeFile(e *host.Engine, in *Input, sess *formats.Session) {
	for _, c := range sess.AgentCompactions {
		fc := FileCompaction{Line: c.Line, Bytes: c.Bytes, Ours: c.Ours, PreTokens: c.PreTokens}
		if c.Summary != "" {
			fc.SummaryTokens = e.CountTokens(c.Summary)
		}
		in.Compactions = append(in.Compactions, fc)
	}
	for _, sa := range sess.Subagents {
		info := SubagentInfo{ID: sa.ID, ToolUseID: sa.ToolUseID, Messages: len(sa.Messages)}
		for i := range sa.Messages {
			for _, b := range sa.Messages[i].Content {
				info.Tokens += e.CountTokens(b.Text) + e.CountTokens(string(b.Input))
			}
		}
		in.Subagents = append(in.Subagents, info)
	}
}

// maxLearnedOverhead bounds an overhead learned from a file: more is a
// usage figure that belongs to something else (a request the file does
// not hold whole).
const maxLearnedOverhead = 100_000

// overhead is the agent's fixed overhead per request: o.AgentOverhead
// when given; else learned from the first usage the agent recorded after
// it last started from scratch (the file's start, or its latest
// compaction), less the estimate of the messages before it; else the
// catalog's default for the agent.
func overhead(e *host.Engine, sess *formats.Session, context []abi.Message, o ReadOptions) Overhead {
	if o.AgentOverhead != 0 {
		return Overhead{Tokens: max(o.AgentOverhead, 0), Source: OverheadFlag}
	}
	def, known := catalog.AgentOverhead(sess.Format)
	if !known {
		return Overhead{}
	}
	// The replacement history before the messages written since the
	// latest compaction carries usage from before it: only messages the
	// agent sent after restarting count.
	from := 0
	if n := len(sess.AgentCompactions); n > 0 && !o.FullHistory {
		from = len(context) - (len(sess.Messages) - sess.AgentCompactions[n-1].FirstKept)
	}
	if t, at, ok := learnOverhead(e, context, max(from, 0)); ok {
		return Overhead{Tokens: t, Source: OverheadFile, At: at}
	}
	// Nothing was sent since the latest compaction: the file's start
	// tells as well.
	if from > 0 {
		if t, _, ok := learnOverhead(e, sess.Messages, 0); ok {
			return Overhead{Tokens: t, Source: OverheadFile, At: -1}
		}
	}
	return Overhead{Tokens: def, Source: OverheadDefault}
}

// learnOverhead is the usage of the first assistant message of msgs from
// index from that records one, less the estimate of the messages before
// it, and that message's index. A usage of no input tokens stands for no
// request: Claude Code records its own <synthetic> answers so.
func learnOverhead(e *host.Engine, msgs []abi.Message, from int) (int, int, bool) {
	for i := from; i < len(msgs); i++ {
		u := msgs[i].Usage
		if msgs[i].Role != abi.RoleAssistant || u == nil {
			continue
		}
		sent := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
		if sent == 0 {
			continue
		}
		t := sent - countMessages(e, msgs[:i])
		return t, i, t >= 0 && t <= maxLearnedOverhead
	}
	return 0, 0, false
}
