package server

import (
	"encoding/json"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/internal/tokencount"
)

// The wire types of the API. Field names are the JSON names the package
// documentation lists; every request type rejects unknown fields.

// EngineOptions override the server's engine configuration for one
// request. Zero values keep the server's settings.
type EngineOptions struct {
	// Model sizes the budget (window and output limit from the catalog)
	// and picks the tokenizer. Summaries are still written by the
	// server's provider model.
	Model string `json:"model,omitempty"`
	// ContextWindow overrides the window, in tokens: a number, or a
	// string in the CLI's syntax ("16k", "1.5m"; tokencount).
	ContextWindow tokencount.Tokens `json:"context_window,omitempty"`
	// Strategy names the summarization strategy plugin.
	Strategy string `json:"strategy,omitempty"`
	// KeepRecentTokens is the newest history kept verbatim.
	KeepRecentTokens tokencount.Tokens `json:"keep_recent_tokens,omitempty"`
	// Thresholds are the gate's shares of the input budget.
	Thresholds *Thresholds `json:"thresholds,omitempty"`
	// Policy is when a session is compacted: threshold (the gate's
	// share) or cache-aware (past ColdShare once the session's prompt
	// cache has expired, that is when its last update is older than
	// CacheTTL; a warm one only halfway from the gate's share to its
	// emergency share).
	Policy string `json:"policy,omitempty"`
	// ColdShare is the cache-aware policy's share of the budget for an
	// expired cache; default 0.5.
	ColdShare float64 `json:"cold_share,omitempty"`
	// CacheTTL is the prompt cache's lifetime, "5m" (default) or "1h".
	CacheTTL string `json:"cache_ttl,omitempty"`
}

// Thresholds are shares of the input budget, 0 to 1; zero keeps the
// server's.
type Thresholds struct {
	Prune           float64 `json:"prune,omitempty"`
	Compact         float64 `json:"compact,omitempty"`
	OverheadReserve float64 `json:"overhead_reserve,omitempty"`
	Emergency       float64 `json:"emergency,omitempty"`
	// MinSavings is the share of the request a compaction must be able
	// to free for the gate to start one (host.Config.MinSavings).
	MinSavings float64 `json:"min_savings,omitempty"`
}

// CompactOptions are the options of POST /v1/compact.
type CompactOptions struct {
	EngineOptions
	// Focus says what the summary must keep, in the user's words.
	Focus string `json:"focus,omitempty"`
	// RecallHint ends the summary with a line naming the recall tools of
	// compact-host mcp: set it only when the agent has them.
	RecallHint bool `json:"recall_hint,omitempty"`
	// Threshold, when set, compacts only a session using at least this
	// share of the budget, as the agent's gate would.
	Threshold float64 `json:"threshold,omitempty"`
	// DryRun returns the plan and no session.
	DryRun bool `json:"dry_run,omitempty"`
}

// CompactRequest is the body of POST /v1/compact.
type CompactRequest struct {
	// Session is the session: a JSON object (Anthropic or OpenAI request,
	// a trajectory), an array of canonical messages, or a string holding
	// a JSONL file (canonical, a session log, Claude Code, Codex, Copilot).
	Session json.RawMessage `json:"session"`
	// Format is the session's format; empty detects it.
	Format string `json:"format,omitempty"`
	// OutputFormat is canonical, anthropic or openai; empty means the
	// input's format where it can be written, else canonical.
	OutputFormat string         `json:"output_format,omitempty"`
	Options      CompactOptions `json:"options"`
}

// CompactReport says what a compaction did.
type CompactReport struct {
	// Action is "compacted", "emergency", "pruned", "none" (under the
	// threshold), "nothing_to_fold" (all of it is recent) or "plan"
	// (dry run).
	Action        string  `json:"action"`
	Format        string  `json:"format"`
	OutputFormat  string  `json:"output_format,omitempty"`
	Messages      int     `json:"messages"`
	Model         string  `json:"model,omitempty"`
	ContextWindow int     `json:"context_window"`
	Budget        int     `json:"budget"`
	Tokenizer     string  `json:"tokenizer"`
	Threshold     float64 `json:"threshold,omitempty"`
	TokensBefore  int     `json:"tokens_before"`
	TokensAfter   int     `json:"tokens_after"`
	Fits          bool    `json:"fits"`
	// RequestedStrategy is the strategy asked for; Strategy the one that
	// wrote the summary, which differs after a fallback (see Fallbacks).
	RequestedStrategy string `json:"requested_strategy,omitempty"`
	Strategy          string `json:"strategy,omitempty"`
	Offline           bool   `json:"offline,omitempty"`
	Folded            int    `json:"messages_folded,omitempty"`
	// Kept is the number of messages in the compacted context, summary
	// included.
	Kept int `json:"messages_kept,omitempty"`
	// Fallbacks are the strategies that failed, each with the one tried
	// next and why ("structured → narrative: ..."); empty when the
	// requested strategy wrote the summary.
	Fallbacks []string `json:"fallbacks,omitempty"`
	Plan      *Plan    `json:"plan,omitempty"`
	// ModelStats are the model calls made, failed ones included.
	ModelStats
	SkippedRecords map[string]int `json:"skipped_records,omitempty"`
	Repaired       map[string]int `json:"repaired,omitempty"`
	Warnings       []string       `json:"warnings,omitempty"`
	DurationMS     float64        `json:"duration_ms"`
}

// Plan is host.Plan on the wire.
type Plan struct {
	FirstKept     int      `json:"first_kept"`
	FirstKeptID   string   `json:"first_kept_id"`
	Folded        int      `json:"folded"`
	Kept          int      `json:"kept"`
	TurnPrefix    bool     `json:"turn_prefix"`
	TokensBefore  int      `json:"tokens_before"`
	TokensKept    int      `json:"tokens_kept"`
	SummaryTokens int      `json:"summary_tokens"`
	FilesRead     []string `json:"files_read,omitempty"`
	FilesModified []string `json:"files_modified,omitempty"`
}

// PlanOf is p on the wire.
func PlanOf(p host.Plan) *Plan {
	return &Plan{
		FirstKept: p.FirstKept, FirstKeptID: p.FirstKeptID, Folded: p.Folded, Kept: p.Kept, TurnPrefix: p.TurnPrefix,
		TokensBefore: p.TokensBefore, TokensKept: p.TokensKept, SummaryTokens: p.SummaryTokens,
		FilesRead: p.FileOps.Read, FilesModified: p.FileOps.Modified,
	}
}

// CompactResponse is the answer of POST /v1/compact.
type CompactResponse struct {
	// Session is the compacted session in the report's output format: a
	// JSON object for anthropic and openai, a string holding the session
	// log (JSONL) for canonical. Absent on a dry run.
	Session json.RawMessage `json:"session,omitempty"`
	Context
	Report CompactReport `json:"report"`
}

// Context is the compacted context as a caller sends it to its model,
// in the output format: canonical messages, or the "messages" (and for
// anthropic the "system") of the request that Session holds, so a client
// need not parse the session log or pick the request apart.
type Context struct {
	// Messages is a JSON array of messages in the output format.
	Messages json.RawMessage `json:"messages,omitempty"`
	// System is the anthropic request's system prompt (a string or an
	// array of text blocks); absent for other formats and when there is
	// none, since those formats keep system messages in Messages.
	System json.RawMessage `json:"system,omitempty"`
}

// GateRequest is what the next model call adds to the session.
type GateRequest struct {
	ToolSchemaTokens tokencount.Tokens `json:"tool_schema_tokens,omitempty"`
	DynamicTokens    tokencount.Tokens `json:"dynamic_tokens,omitempty"`
}

// CheckRequest is the body of POST /v1/check.
type CheckRequest struct {
	Session      json.RawMessage `json:"session"`
	Format       string          `json:"format,omitempty"`
	OutputFormat string          `json:"output_format,omitempty"`
	Options      EngineOptions   `json:"options"`
	Request      GateRequest     `json:"request"`
	// Apply runs the gate (prune, compact, emergency as needed) and
	// returns the session; without it the check only measures.
	Apply bool `json:"apply,omitempty"`
}

// Budget is the resolved budget of the engine that served a request.
type Budget struct {
	ContextWindow   int `json:"context_window"`
	MaxOutputTokens int `json:"max_output_tokens"`
	// Input is what a request may carry: the window less the output reserve.
	Input int `json:"input"`
	// PruneAt, CompactAt and EmergencyAt are shares of Input.
	PruneAt     float64 `json:"prune_at"`
	CompactAt   float64 `json:"compact_at"`
	EmergencyAt float64 `json:"emergency_at"`
}

// Decision is host.Decision on the wire.
type Decision struct {
	// Action is "none", "pruned", "compacted" or "emergency".
	Action       string  `json:"action"`
	TokensBefore int     `json:"tokens_before"`
	TokensAfter  int     `json:"tokens_after"`
	Budget       int     `json:"budget"`
	Usage        float64 `json:"usage"`
	Fits         bool    `json:"fits"`
}

// CheckResponse is the answer of POST /v1/check.
type CheckResponse struct {
	Format    string `json:"format"`
	Messages  int    `json:"messages"`
	Tokenizer string `json:"tokenizer"`
	Budget    Budget `json:"budget"`
	// Tokens is the session's context; Overhead the request's tool
	// schemas and dynamic context; Total their sum, which the budget
	// must hold.
	Tokens   int `json:"tokens"`
	Overhead int `json:"overhead"`
	Total    int `json:"total"`
	// Usage is Total as a share of the input budget.
	Usage float64 `json:"usage"`
	// Action is what the gate would do now: "none", "prune", "compact"
	// or "emergency".
	Action string `json:"action"`
	// Fits reports whether Total is within the budget: before the gate
	// ran, or after it with apply.
	Fits bool `json:"fits"`
	// With apply: what the gate did, and the session after it.
	Decision     *Decision       `json:"decision,omitempty"`
	OutputFormat string          `json:"output_format,omitempty"`
	Session      json.RawMessage `json:"session,omitempty"`
	// Context is the session after the gate as messages to send; it is an
	// object of its own because "messages" here has long been the count.
	Context   *Context `json:"context,omitempty"`
	Fallbacks []string `json:"fallbacks,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
	// With apply, the model calls the gate made.
	*ModelStats
}

// TruncateRequest is the body of POST /v1/truncate.
type TruncateRequest struct {
	// Tool picks the category when Category is empty.
	Tool     string `json:"tool,omitempty"`
	Category string `json:"category,omitempty"`
	Content  string `json:"content"`
	// MaxTokens is the cap, notice included; zero means the server's
	// tool output limit.
	MaxTokens tokencount.Tokens `json:"max_tokens,omitempty"`
}

// TruncateResponse is the answer of POST /v1/truncate.
type TruncateResponse struct {
	Content      string `json:"content"`
	Category     string `json:"category"`
	Truncated    bool   `json:"truncated"`
	BytesBefore  int    `json:"bytes_before"`
	BytesAfter   int    `json:"bytes_after"`
	TokensBefore int    `json:"tokens_before"`
	TokensAfter  int    `json:"tokens_after"`
}

// PluginInfo is one entry of GET /v1/plugins.
type PluginInfo struct {
	Name        string   `json:"name"`
	Source      string   `json:"source"`
	Path        string   `json:"path,omitempty"`
	Loaded      bool     `json:"loaded"`
	Kinds       []string `json:"kinds,omitempty"`
	Categories  []string `json:"categories,omitempty"`
	Version     string   `json:"version,omitempty"`
	ABI         string   `json:"abi,omitempty"`
	Description string   `json:"description,omitempty"`
	Overridden  bool     `json:"overridden,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// PluginsResponse is the answer of GET /v1/plugins.
type PluginsResponse struct {
	Dir     string       `json:"dir"`
	Plugins []PluginInfo `json:"plugins"`
}

// Health is the answer of GET /healthz.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	ABI     string `json:"abi"`
	// Plugins counts the plugins that loaded; Broken those that did not.
	Plugins int `json:"plugins"`
	Broken  int `json:"broken,omitempty"`
}
