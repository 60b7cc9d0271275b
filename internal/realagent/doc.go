// Package realagent resumes agents' session files with the real agents,
// Claude Code and the Codex CLI, against a fake provider on loopback, and
// records what they send. It is the proof that a number compact-host
// reports about a session file is what the agent sends when it resumes.
//
// The agents are npm packages pinned by testdata/package.json and
// package-lock.json, installed with
//
//	(cd internal/realagent/testdata && npm ci --no-audit --no-fund)
//
// Both ship native binaries in the npm packages (Claude Code as
// @anthropic-ai/claude-code-linux-x64, Codex as @openai/codex-linux-x64),
// so nothing is downloaded from anywhere but the npm registry. Without
// them the tests that run an agent skip, naming that command; with CI=true
// they fail.
//
// Resume copies the session file into a home of the agent's own and runs,
// in an empty working directory:
//
//	claude -p --resume <session-id> --model <the session's model> <prompt>
//
// with the file at $CLAUDE_CONFIG_DIR/projects/<working directory, every
// character but letters and digits replaced by '-'>/<session-id>.jsonl and
// ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY (a dummy), DISABLE_AUTOUPDATER,
// DISABLE_TELEMETRY, DISABLE_ERROR_REPORTING and
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC set; or
//
//	codex exec --skip-git-repo-check resume --model <the session's model> <session-id> <prompt>
//
// with the file at $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<session
// start, YYYY-MM-DDThh-mm-ss>-<session-id>.jsonl, openai_base_url in
// $CODEX_HOME/config.toml and OPENAI_API_KEY (a dummy). Every proxy
// variable points at the fake upstream, which records and refuses any
// request for another host; the run has a deadline, and the agent is
// killed with every process it started when the deadline passes.
//
// With Options.BaseURL the agent's model calls go to a compact-host proxy
// instead; the tests run Claude Code, and opencode (pinned in
// testdata/opencode), through one in front of a scripted upstream.
package realagent
