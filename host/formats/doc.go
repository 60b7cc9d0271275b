// Package formats reads and writes the session formats that coding agents
// leave on disk, converting each to the canonical message model of package
// abi.
//
// Readers exist for the canonical JSONL form, Anthropic Messages API request
// JSON, OpenAI Chat Completions JSON, Claude Code session JSONL, Codex CLI
// rollout JSONL, Copilot CLI events JSONL, Gemini CLI chat recordings,
// opencode session exports, Cline / Roo Code / Kilo Code task histories
// (api_conversation_history.json), Aider chat histories, mini-swe-agent
// trajectories and SWE-agent trajectories. Writers exist for the canonical,
// Anthropic and OpenAI forms.
//
// Every reader returns messages that satisfy [Validate]: each tool_use has
// exactly one tool_result in the user message(s) right after the assistant
// message that holds the call, no tool_result is orphaned, and message IDs
// are unique and derived deterministically from the source (the source's own
// IDs where it has them, "<format>-<index>" otherwise). Where the source needs
// repair to get there (a call interrupted before its result was recorded, a
// result without a call), the reader repairs it and counts the repair in
// [Session.Repaired]; records that carry no conversation content are counted
// in [Session.Skipped].
//
// Anthropic and OpenAI requests are kept whole: [Session.Request] holds the
// body as read, and [Request.Write] writes a compacted conversation back
// into it, keeping the bytes of every field, message and block the
// compaction did not change. [ReplaceMessages] does the same for a proxy
// that replaces the first messages of a request body. Blocks with no
// canonical form (redacted_thinking, document, audio) are read from requests
// as placeholder text so that they come back in their place.
//
// Given a format, Read refuses input that is plainly another one with a
// [*MismatchError]; input no format matches is [ErrUnknownFormat], whose
// message lists [Names].
//
// An agent's own compactions (Claude Code compact_boundary, Codex compacted,
// a Cline isSummary message, an opencode summary message)
// are reported in [Session.AgentCompactions]; the agent's summary is not part
// of [Session.Messages], which hold the original history.
package formats
