package host

import (
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
)

// Config sets the engine's model, thresholds and strategies. The zero value
// of every field means its default; Validate reports impossible settings.
type Config struct {
	// Model names the model the agent calls, for the catalog lookup of its
	// window and for calibration. Optional when ContextWindow is set.
	Model string
	// ContextWindow overrides the catalog's window (tokens).
	ContextWindow int
	// MaxOutputTokens is the reply size reserved out of the window;
	// default: the catalog's output limit, or 8,192 for unknown models.
	MaxOutputTokens int
	// Tokenizer is "auto" (default: exact for OpenAI models, chars/4
	// otherwise), "chars", "o200k" or "cl100k".
	Tokenizer string

	// PruneThreshold is the share of the input budget above which old,
	// oversized tool results are shortened. Default 0.70.
	PruneThreshold float64
	// CompactThreshold less OverheadReserve (floor 0.1) is the share above
	// which the history is compacted. Defaults 0.85 and 0.10.
	CompactThreshold float64
	OverheadReserve  float64
	// EmergencyThreshold is the share at or above which compaction takes
	// the emergency path: no model call, always succeeds. Default 0.95.
	EmergencyThreshold float64
	// Policy decides when the gate compacts: PolicyThreshold (default)
	// past the compaction point; PolicyCacheAware past ColdShare of the
	// budget when the caller says the prompt cache has expired
	// (Request.CacheCold), and a warm cache only halfway from the
	// compaction point to the emergency threshold (cost.WarmShare).
	Policy string
	// ColdShare is where the cache-aware policy compacts an expired
	// cache, as a share of the budget. Default 0.5.
	ColdShare float64
	// CacheTTL is how long the provider keeps a prompt-cache entry
	// without a request (cost.TTL5m or cost.TTL1h): what callers that
	// track the cache take as expired. Default 5 minutes.
	CacheTTL time.Duration
	// DisableCompaction turns the gate into a pure check.
	DisableCompaction bool
	// DisablePrune keeps every tool result as it is: the gate compacts but
	// never shortens a kept result in place (a proxy must not change the
	// bytes of the messages it keeps).
	DisablePrune bool
	// RecallHint ends the summary of every compaction with recall.Hint,
	// as CompactOptions.RecallHint does for one: set it only when the
	// agent has the recall tools (a proxy that serves them).
	RecallHint bool

	// KeepRecentTokens is how much of the newest history is kept verbatim.
	// Default: a quarter of the budget, at most 40,000.
	KeepRecentTokens int
	// MinKeepMessages is the fewest messages kept verbatim. Default 2.
	MinKeepMessages int
	// PruneMinTokens is the size above which an old tool result is pruned.
	// Default: 2,000, or half of ToolOutputTokens when that is smaller, so
	// outputs already capped on entry can still be pruned when old.
	PruneMinTokens int
	// PruneKeepTokens is how much of a pruned result remains (head and
	// tail). Default 400.
	PruneKeepTokens int
	// ProtectRecentTokens is the newest part of the context that pruning
	// never touches. Default: KeepRecentTokens.
	ProtectRecentTokens int
	// EmergencyKeepMessages is how many of the newest messages the
	// emergency path keeps, or fewer (never under MinKeepMessages) when
	// they would leave the context at the compaction point. Default 8.
	EmergencyKeepMessages int

	// MinSavings is the share of the request a compaction must be able to
	// free for the gate to start it: what can be folded (not the pinned
	// messages, not the kept tail), less what the summary is expected to
	// add, and for the emergency path under the budget what dropping the
	// messages frees. After a compaction that freed less, the gate waits
	// until the session has grown by this share of the budget. Default 0.10.
	MinSavings float64
	// BreakerFailures consecutive failures of a strategy open its circuit
	// breaker for BreakerCooldown. Defaults 3 and 5 minutes.
	BreakerFailures int
	BreakerCooldown time.Duration

	// Strategy is the summarization strategy. Default DefaultStrategy.
	Strategy string
	// Fallbacks are tried in order when the strategy fails. Default
	// ["narrative", "truncate"]; the emergency path always follows them.
	Fallbacks []string
	// SummaryTokens is the summary size asked for. Default: a twentieth of
	// the budget, between 1,000 and 8,000, or an eighth of it up to 3,000
	// when that is more (budgets under 60,000).
	SummaryTokens int
	// SummarizerBudget is the input budget of the model that summarizes;
	// default: the engine's own budget.
	SummarizerBudget int
	// StrategyTimeout bounds one strategy call. Default 2 minutes.
	StrategyTimeout time.Duration

	// ToolOutputTokens caps a tool output in TruncateToolOutput. Default:
	// a fortieth of the budget, between 2,000 and 16,000.
	ToolOutputTokens int
	// ToolCategories maps tool names to output categories (head-tail,
	// match-list, file-content, generic, or a plugin's own) over the
	// defaults for common agents' tools.
	ToolCategories map[string]string

	// FileTools adds tool names to the file-operation tracker.
	FileTools FileTools
	// SyncWrites makes every log append durable before it returns.
	SyncWrites bool
}

// The policies of Config.Policy.
const (
	PolicyThreshold  = "threshold"
	PolicyCacheAware = "cache-aware"
)

// DefaultStrategy is the strategy of a Config that names none.
const DefaultStrategy = "structured"

// resolved is a Config with every default filled in and the budget known.
type resolved struct {
	Config
	budget      int
	pruneAt     float64
	compactAt   float64
	emergencyAt float64
	// summarizerSet is true when SummarizerBudget was given.
	summarizerSet bool
	// summarySet is true when SummaryTokens was given.
	summarySet bool
}

// MaxContextWindow is the largest window, and the largest token count of
// any setting, a Config may name: far above any model's, low enough that
// sums of token counts cannot overflow.
const MaxContextWindow = 1 << 30

// ConfigError is a setting of Config that cannot work. Field names the
// Config field, so that a caller which took the setting from a flag, a
// file key or a request field can name that instead (see Format).
type ConfigError struct {
	Field string
	Value any
	// Reason says what is wrong and what would work. Other fields appear
	// in it as {FieldName}.
	Reason string
}

func (e *ConfigError) Error() string {
	return "host: config: " + e.Format(func(f string) string { return f })
}

// Format renders the error with every field, Field and those in Reason,
// named by name.
func (e *ConfigError) Format(name func(field string) string) string {
	reason := fieldRef.ReplaceAllStringFunc(e.Reason, func(m string) string { return name(m[1 : len(m)-1]) })
	if e.Value == nil {
		return name(e.Field) + ": " + reason
	}
	return fmt.Sprintf("%s %v: %s", name(e.Field), e.Value, reason)
}

var fieldRef = regexp.MustCompile(`\{[A-Za-z]+\}`)

func configErr(field string, value any, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
}

// Validate reports, as a *ConfigError, the first field of c that no
// default can stand for: a number that is not finite, a share outside
// 0..1, a negative count or duration, a count past MaxContextWindow, an
// unknown tokenizer. It needs no window, so a partial Config (a config
// file's part) can be checked. New checks this and how the fields fit
// together: the window known, the thresholds in order, the kept tail
// within the budget.
func (c Config) Validate() error {
	shares := []struct {
		name string
		v    float64
	}{{"PruneThreshold", c.PruneThreshold}, {"CompactThreshold", c.CompactThreshold},
		{"EmergencyThreshold", c.EmergencyThreshold}, {"MinSavings", c.MinSavings}, {"ColdShare", c.ColdShare}}
	for _, f := range shares {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			return configErr(f.name, f.v, "want a share between 0 and 1")
		}
	}
	// A negative reserve is allowed: it turns the reserve off.
	if v := c.OverheadReserve; math.IsNaN(v) || math.IsInf(v, 0) || v > 1 {
		return configErr("OverheadReserve", v, "want a share of at most 1 (0 for the default, negative for none)")
	}
	counts := []struct {
		name string
		v    int
	}{{"ContextWindow", c.ContextWindow}, {"MaxOutputTokens", c.MaxOutputTokens}, {"KeepRecentTokens", c.KeepRecentTokens},
		{"MinKeepMessages", c.MinKeepMessages}, {"PruneMinTokens", c.PruneMinTokens}, {"PruneKeepTokens", c.PruneKeepTokens},
		{"ProtectRecentTokens", c.ProtectRecentTokens}, {"EmergencyKeepMessages", c.EmergencyKeepMessages},
		{"BreakerFailures", c.BreakerFailures}, {"SummaryTokens", c.SummaryTokens}, {"SummarizerBudget", c.SummarizerBudget},
		{"ToolOutputTokens", c.ToolOutputTokens}}
	for _, f := range counts {
		if f.v < 0 || f.v > MaxContextWindow {
			return configErr(f.name, f.v, "want 0 (the default) up to %d", MaxContextWindow)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"BreakerCooldown", c.BreakerCooldown}, {"StrategyTimeout", c.StrategyTimeout}, {"CacheTTL", c.CacheTTL}} {
		if f.v < 0 {
			return configErr(f.name, f.v, "want a positive duration, or 0 for the default")
		}
	}
	switch c.Policy {
	case "", PolicyThreshold, PolicyCacheAware:
	default:
		return configErr("Policy", fmt.Sprintf("%q", c.Policy), "want threshold or cache-aware")
	}
	switch c.Tokenizer {
	case "", "auto", "chars", "o200k", "cl100k":
	default:
		return configErr("Tokenizer", fmt.Sprintf("%q", c.Tokenizer), "want auto, chars, o200k or cl100k")
	}
	return nil
}

func (c Config) resolve() (resolved, error) {
	r := resolved{Config: c}
	if err := c.Validate(); err != nil {
		return r, err
	}
	window, maxOut := c.ContextWindow, c.MaxOutputTokens
	var budget int
	if m, ok := catalog.Lookup(c.Model); ok && c.Model != "" {
		if window == 0 {
			window = m.ContextWindow
			if maxOut == 0 {
				budget = m.InputBudget(0)
			}
		}
		if maxOut == 0 {
			maxOut = m.MaxOutput
		}
	}
	if window <= 0 {
		if c.Model == "" {
			return r, &ConfigError{Field: "ContextWindow", Reason: "unknown: set {Model} or {ContextWindow}"}
		}
		return r, configErr("Model", fmt.Sprintf("%q", c.Model), "is not in the catalog; set {ContextWindow}")
	}
	if maxOut <= 0 {
		maxOut = min(8192, window/4)
	}
	if maxOut >= window {
		maxOut = window / 4
	}
	if budget == 0 {
		budget = window - maxOut
	}
	r.budget = budget
	r.ContextWindow, r.MaxOutputTokens = window, maxOut

	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&r.PruneThreshold, 0.70)
	def(&r.CompactThreshold, 0.85)
	def(&r.OverheadReserve, 0.10)
	def(&r.EmergencyThreshold, 0.95)
	def(&r.MinSavings, 0.10)
	defInt(&r.KeepRecentTokens, min(40000, budget/4))
	defInt(&r.MinKeepMessages, 2)
	defInt(&r.ToolOutputTokens, min(16000, max(2000, budget/40)))
	defInt(&r.PruneMinTokens, min(2000, r.ToolOutputTokens/2))
	defInt(&r.PruneKeepTokens, 400)
	defInt(&r.ProtectRecentTokens, r.KeepRecentTokens)
	defInt(&r.EmergencyKeepMessages, 8)
	defInt(&r.BreakerFailures, 3)
	r.summarySet = r.SummaryTokens > 0
	defInt(&r.SummaryTokens, defaultSummaryTokens(budget))
	r.summarizerSet = r.SummarizerBudget > 0
	defInt(&r.SummarizerBudget, budget)
	if r.BreakerCooldown <= 0 {
		r.BreakerCooldown = 5 * time.Minute
	}
	if r.StrategyTimeout <= 0 {
		r.StrategyTimeout = 2 * time.Minute
	}
	if r.CacheTTL <= 0 {
		r.CacheTTL = cost.TTL5m
	}
	if r.Policy == "" {
		r.Policy = PolicyThreshold
	}
	def(&r.ColdShare, 0.5)
	if r.Strategy == "" {
		r.Strategy = DefaultStrategy
	}
	if r.Fallbacks == nil {
		r.Fallbacks = []string{"narrative", "truncate"}
	}
	if r.OverheadReserve < 0 {
		r.OverheadReserve = 0 // a negative value disables the reserve
	}
	r.pruneAt = r.PruneThreshold
	r.compactAt = max(r.CompactThreshold-r.OverheadReserve, 0.1)
	r.emergencyAt = r.EmergencyThreshold
	if r.emergencyAt <= r.compactAt {
		return r, configErr("EmergencyThreshold", r.emergencyAt,
			"must be above the compaction point %.2f ({CompactThreshold} less {OverheadReserve})", r.compactAt)
	}
	if r.KeepRecentTokens >= budget {
		return r, configErr("KeepRecentTokens", r.KeepRecentTokens, "must be below the input budget of %d tokens", budget)
	}
	return r, nil
}

// Budget is the resolved input budget and thresholds of an engine.
type Budget struct {
	ContextWindow   int
	MaxOutputTokens int
	// Input is the tokens a request may carry: window less output reserve.
	Input int
	// PruneAt, CompactAt and EmergencyAt are shares of Input.
	PruneAt, CompactAt, EmergencyAt float64
	// KeepRecentTokens and SummaryTokens are what a compaction keeps
	// verbatim and the summary size it asks for; MinSavings the least
	// share of the context it must free.
	KeepRecentTokens, SummaryTokens int
	MinSavings                      float64
	// Policy, ColdShare and CacheTTL are Config's, resolved.
	Policy    string
	ColdShare float64
	CacheTTL  time.Duration
}

// summaryTarget is the summary size asked for when folding folded tokens
// with room tokens of the budget left for the messages (the budget less
// a fixed overhead the request carries, such as an agent's system prompt
// and tools): SummaryTokens when it was set; by default a twentieth of the
// room (1,000 to 8,000) and up to defaultSummaryTokens of the room (an
// eighth at small budgets) as the fold allows, a quarter of it. A summary
// bigger than a quarter of what it replaces would eat the room the
// compaction is for: where a pinned part leaves little to fold, the larger
// target would keep the gate from compacting until the emergency path; and
// a target sized by the whole budget would not fit beside a large overhead.
func (c *resolved) summaryTarget(room, folded int) int {
	if c.summarySet {
		return c.SummaryTokens
	}
	limit := min(c.SummaryTokens, defaultSummaryTokens(room))
	base := min(limit, max(1000, room/20))
	return min(limit, max(base, folded/4))
}

// defaultSummaryTokens is the summary size asked for under an input budget
// of budget tokens: a twentieth of it, between 1,000 and 8,000, but at
// least an eighth of it up to 3,000. The task, the next step and the files
// cost a summary about the same at every window; a twentieth of a small
// budget (1,200 tokens of 24,000) is mostly spent on them, and the decisions
// and what was found are dropped. An eighth with the kept recent messages
// (a quarter) still leaves the context under two fifths of its budget after
// a compaction, far from the compaction point, so a compaction frees much
// more than MinSavings; from a 60,000 budget on, a twentieth is the larger
// and nothing changes.
func defaultSummaryTokens(budget int) int {
	return min(8000, max(1000, budget/20, min(3000, budget/8)))
}
