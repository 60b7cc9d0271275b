// Package eval replays real agent sessions through the compaction engine and
// measures what compaction keeps and what it costs.
//
// For every session, context window and strategy, [Run] feeds the session's
// messages to a fresh engine in order, as the agent appended them, and runs
// the gate (Engine.EnsureFits) wherever the agent made a model call: before
// each assistant message, which is also right after the last tool result of
// a batch, and once more after a trailing batch of results. After every gate
// call it validates the context (no orphaned tool result, no call without
// its result); after every compaction it measures which files of the folded
// part the context still names, whether the latest folded user request is
// still there, and how long the engine took.
//
// Usage reports are fed to the engine's calibration as an agent would, with
// one translation: the recorded figure is what the provider counted for the
// agent's context, which includes a system prompt and tool schemas that the
// transcript does not hold, and which stops matching ours once either side
// compacts. The replay feeds the recorded prompt tokens less the part the
// transcript does not hold (inferred from the first report), scaled by the
// size of the context the replay sends over the size of the one the agent
// sent. Before any compaction the two contexts are the same messages.
// After one of the agent's own compactions the file no longer holds the
// agent's context (an encrypted summary, files re-attached), so what a
// report counts beyond the messages the file holds, at the ratio measured
// before, is taken for hidden content, not scaled.
//
// In trajectories whose actions are the assistant's text (SWE-agent, the
// first mini-swe-agent format) the user messages after the first action
// are command output; the request the retention figures check is the
// task before it.
//
// With probe files ([LoadProbes], [RunProbes]) it scores what a strategy's
// summary keeps at chosen points of real sessions: facts, file changes,
// next steps and decisions, each matched deterministically; where an agent
// compacted its own context at a point, its text answers the same probes
// beside ours.
//
// Beside the replays, Run measures token accounting (chars/4, the engine's
// calibrated estimate and the o200k tokenizer against the usage each
// session records) and compares the agent's own compactions, where a session
// holds one, with the strategies' on the same folded span.
package eval
