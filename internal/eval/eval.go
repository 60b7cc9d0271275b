package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
)

// Defaults of Options.
var (
	DefaultWindows    = []int{200_000, 128_000, 32_000}
	DefaultStrategies = []string{"structured", "narrative", "truncate"}
)

// ErrNoSessions is returned when no session was given and the shared corpus
// is not found.
var ErrNoSessions = errors.New("eval: no sessions to evaluate")

// SessionError is a session named in Options.Sessions that cannot be
// read. A corpus file that cannot be read is reported in the report
// instead: the corpus may hold files that are no sessions.
type SessionError struct {
	Path string
	Err  error
}

func (e *SessionError) Error() string { return fmt.Sprintf("eval: %s: %v", e.Path, e.Err) }
func (e *SessionError) Unwrap() error { return e.Err }

// Options say what to evaluate. The zero value evaluates every session of
// the shared corpus at DefaultWindows with DefaultStrategies, offline, with
// the built-in strategies run as wasm modules.
type Options struct {
	// Sessions are session files in any format package formats reads.
	// Default: every file in the shared corpus (see CorpusDir).
	Sessions []string
	// Windows are the context windows to replay at, in tokens.
	Windows []int
	// Strategies are the strategy names to evaluate.
	Strategies []string
	// Registry supplies the strategies. Nil: Run opens a registry of the
	// built-ins and the default plugins directory, and closes it.
	Registry *plugin.Registry
	// InProcess runs the built-in strategies linked into the binary
	// instead of as wasm modules; other names still come from the
	// registry.
	InProcess bool
	// Model is the model strategies may call; nil runs them offline.
	Model host.ModelClient
	// TruncateToolOutputs caps each tool result with
	// Engine.TruncateToolOutput before it is appended, as an agent that
	// uses the engine's truncators does. The sessions hold the outputs
	// as the agent saw them; off by default.
	TruncateToolOutputs bool
	// Progress, if set, gets a line per session and per run.
	Progress io.Writer
}

// Report is what Run measured. WriteTable, WriteJSON and WriteCharts
// present it.
type Report struct {
	Go       string `json:"go"`
	Platform string `json:"platform"`
	CPUs     int    `json:"cpus"`
	Offline  bool   `json:"offline"`
	// TruncateToolOutputs says tool results were capped on entry.
	TruncateToolOutputs bool           `json:"truncate_tool_outputs"`
	Windows             []int          `json:"windows"`
	Strategies          []StrategyInfo `json:"strategies"`
	Sessions            []SessionInfo  `json:"sessions"`
	Runs                []RunResult    `json:"runs"`
	Accounting          []Accounting   `json:"accounting"`
	// AgentComparisons compare each compaction an agent made itself with
	// the strategies' on the same folded span.
	AgentComparisons []AgentComparison `json:"agent_comparisons"`
	Targets          []Target          `json:"targets"`
	// MemoryMethod says how PeakHeapBytes is measured.
	MemoryMethod string `json:"memory_method"`
	// Notes say what the session files do not contain and how that
	// bears on the figures.
	Notes []string `json:"notes"`
}

// StrategyInfo is where a strategy came from.
type StrategyInfo struct {
	Name      string `json:"name"`
	Transport string `json:"transport"` // builtin (wasm), wasm, process, inprocess
	Path      string `json:"path,omitempty"`
	Version   string `json:"version,omitempty"`
	// LoadMillis is the time to load it (wasm: compile or read the
	// compilation cache), kept out of every compaction's time.
	LoadMillis float64 `json:"load_ms"`
	Note       string  `json:"note,omitempty"`
}

// SessionInfo describes one session file.
type SessionInfo struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Bytes    int64  `json:"bytes"`
	Format   string `json:"format"`
	Messages int    `json:"messages"`
	// Calls are the model calls the agent made: the gate points.
	Calls        int `json:"calls"`
	UsageReports int `json:"usage_reports"`
	// Tokens is the chars/4 estimate of all messages, uncompacted;
	// PinnedTokens of the pinned ones (system prompts the reader marks
	// pinned), which no compaction folds.
	Tokens       int `json:"tokens"`
	PinnedTokens int `json:"pinned_tokens"`
	// LiveTokens is the chars/4 estimate of the live context: what the
	// agent sends when it resumes, after its own compactions and those
	// compact-host wrote into the file. The replays feed the session
	// from its start, so they read the whole history.
	LiveTokens       int `json:"live_tokens"`
	AgentCompactions int `json:"agent_compactions"`
	// Baseline is the chars/4 estimate of the uncompacted context at each
	// call; Recorded the prompt tokens the file records for the call, 0
	// where it records none.
	Baseline []int  `json:"baseline"`
	Recorded []int  `json:"recorded"`
	Err      string `json:"error,omitempty"`
}

// RunResult is one replay: a session at a window with a strategy.
type RunResult struct {
	Session  string `json:"session"`
	Window   int    `json:"window"`
	Budget   int    `json:"budget"`
	Strategy string `json:"strategy"`
	Calls    int    `json:"calls"`
	// Compactions lists every compaction in order.
	Compactions []CompactionResult `json:"compactions"`
	Emergencies int                `json:"emergencies"`
	Fallbacks   int                `json:"fallbacks"`
	Prunes      int                `json:"prunes"`
	// Overflows counts usage reports (translated to the replayed context)
	// over the window: calls that would not have fitted.
	Overflows int `json:"overflows"`
	// TokensBefore and TokensAfter sum the compactions' calibrated
	// estimates of the request before and after.
	TokensBefore int     `json:"tokens_before"`
	TokensAfter  int     `json:"tokens_after"`
	Compression  float64 `json:"compression"` // TokensBefore / TokensAfter
	// UncalibratedAfter counts compactions whose calibrated tokens after
	// came out as zero while tokens remained; their TokensAfter is the
	// chars/4 estimate instead.
	UncalibratedAfter int `json:"uncalibrated_after,omitempty"`
	// Recall pools the artifact recall of every compaction.
	Recall Recall `json:"recall"`
	// Retention counts compactions whose folded part held a user request
	// and, of those, the ones whose context still carried it, and the
	// ones whose context carried the latest request of the session.
	RequestsFolded   int `json:"requests_folded"`
	RequestsRetained int `json:"requests_retained"`
	LatestRetained   int `json:"latest_retained"`
	// Truncated counts tool results capped before they were appended
	// (Options.TruncateToolOutputs).
	Truncated int `json:"truncated,omitempty"`
	// ValidGates of Gates left a context that host.Validate accepts.
	Gates         int      `json:"gates"`
	ValidGates    int      `json:"valid_gates"`
	Invalid       []string `json:"invalid,omitempty"`
	GateErrors    []string `json:"gate_errors,omitempty"`
	EngineMillis  Millis   `json:"engine_ms"`
	HostMillis    Millis   `json:"host_ms"`
	PeakHeapBytes uint64   `json:"peak_heap_bytes"`
	WallMillis    float64  `json:"wall_ms"`
	// Series is the context at each call, for the charts.
	Series []Point `json:"series"`
	Err    string  `json:"error,omitempty"`

	// textActions: the session's actions are text (see latestRequest).
	textActions bool
}

// Validity is the share of gate calls that left a valid context.
func (r *RunResult) Validity() float64 { return share(r.ValidGates, r.Gates) }

// Retention is the share of folded requests still carried, 1 when no
// compaction folded one.
func (r *RunResult) Retention() float64 { return share(r.RequestsRetained, r.RequestsFolded) }

// CompactionResult is one compaction of a replay.
type CompactionResult struct {
	Call         int    `json:"call"`
	Strategy     string `json:"strategy"`
	Emergency    bool   `json:"emergency,omitempty"`
	TokensBefore int    `json:"tokens_before"`
	TokensAfter  int    `json:"tokens_after"`
	// Uncalibrated says TokensAfter is the chars/4 estimate: the
	// calibrated one came out as zero while tokens remained.
	Uncalibrated   bool `json:"uncalibrated,omitempty"`
	MessagesFolded int  `json:"messages_folded"`
	// Cut is the index of the first message kept.
	Cut int `json:"cut"`
	// SummaryTokens is the chars/4 size of the summary spliced in, the
	// host's additions included.
	SummaryTokens int    `json:"summary_tokens"`
	Recall        Recall `json:"recall"`
	// RequestFolded says the folded part held a user request;
	// RequestRetained that the context still carries it. LatestRetained
	// says the context carries the latest request of the session so far,
	// which may be kept verbatim after the cut.
	RequestFolded   bool `json:"request_folded"`
	RequestRetained bool `json:"request_retained"`
	LatestRetained  bool `json:"latest_retained"`
	// DurationMillis is the compaction's CompactionEvent.Duration;
	// EngineMillis the same less the time spent waiting for the model;
	// StrategyMillis the time in the strategy less the model's;
	// HostMillis the rest: planning, verification, splicing.
	DurationMillis float64 `json:"duration_ms"`
	EngineMillis   float64 `json:"engine_ms"`
	StrategyMillis float64 `json:"strategy_ms"`
	HostMillis     float64 `json:"host_ms"`
}

// Millis summarises durations in milliseconds.
type Millis struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

func (m *Millis) add(v float64) {
	m.Mean = (m.Mean*float64(m.N) + v) / float64(m.N+1)
	m.N++
	m.Max = max(m.Max, v)
}

// Point is the context at one call: the chars/4 estimate before and after
// the gate.
type Point struct {
	Call      int  `json:"call"`
	Before    int  `json:"before"`
	After     int  `json:"after"`
	Compacted bool `json:"compacted,omitempty"`
}

// Target is one quality or speed goal and whether the report meets it.
type Target struct {
	Name   string `json:"name"`
	Met    bool   `json:"met"`
	Detail string `json:"detail"`
}

// Run evaluates every session × window × strategy of opts.
func Run(ctx context.Context, opts Options) (*Report, error) {
	named := len(opts.Sessions) > 0
	if !named {
		dir, err := CorpusDir()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoSessions, err)
		}
		if opts.Sessions, err = CorpusSessions(dir); err != nil {
			return nil, err
		}
	}
	if len(opts.Sessions) == 0 {
		return nil, ErrNoSessions
	}
	if len(opts.Windows) == 0 {
		opts.Windows = DefaultWindows
	}
	if len(opts.Strategies) == 0 {
		opts.Strategies = DefaultStrategies
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	for _, w := range opts.Windows {
		if _, err := host.New(host.Config{ContextWindow: w}); err != nil {
			return nil, fmt.Errorf("eval: window %d: %w", w, err)
		}
	}
	src, err := newSource(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer src.close()

	rep := &Report{
		Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(),
		Offline: opts.Model == nil, Windows: opts.Windows, MemoryMethod: memoryMethod,
		TruncateToolOutputs: opts.TruncateToolOutputs,
	}
	strategies := map[string]host.Strategy{}
	for _, name := range opts.Strategies {
		s, info, err := src.strategy(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("eval: strategy %q: %w", name, err)
		}
		strategies[name] = s
		rep.Strategies = append(rep.Strategies, info)
	}

	var truncators host.TruncatorResolver
	if opts.TruncateToolOutputs {
		truncators = src.truncators(ctx)
	}
	for _, path := range opts.Sessions {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		began := time.Now()
		sess, info, err := loadSession(path)
		if err != nil && named {
			return nil, &SessionError{Path: path, Err: errors.Unwrap(err)}
		}
		if err != nil {
			info.Err = err.Error()
			rep.Sessions = append(rep.Sessions, info)
			fmt.Fprintf(progress, "%s: %v\n", info.Name, err)
			continue
		}
		acc, trans := account(ctx, sess, info.Name)
		info.Recorded = acc.recorded
		info.Baseline = acc.baseline
		if acc.Reports > 0 {
			rep.Accounting = append(rep.Accounting, acc.Accounting)
		}
		rep.Sessions = append(rep.Sessions, info)
		fmt.Fprintf(progress, "%s: %s, %d messages, %d calls, %d usage reports, %d agent compactions, live context ~%d of %d tokens (%.1fs)\n",
			info.Name, info.Format, info.Messages, info.Calls, info.UsageReports, info.AgentCompactions, info.LiveTokens, info.Tokens, time.Since(began).Seconds())

		for ci := range sess.AgentCompactions {
			cmp := compareAgent(ctx, opts, sess, info.Name, ci, slices.Max(opts.Windows), strategies, opts.Strategies)
			rep.AgentComparisons = append(rep.AgentComparisons, cmp)
		}
		for _, w := range opts.Windows {
			for _, name := range opts.Strategies {
				if err := ctx.Err(); err != nil {
					return rep, err
				}
				r := replay(ctx, replayConfig{
					session: sess, name: info.Name, window: w, strategy: name, impl: strategies[name],
					model: opts.Model, usage: trans, truncators: truncators,
				})
				rep.Runs = append(rep.Runs, r)
				fmt.Fprintf(progress, "%s window=%d strategy=%s: %s\n", info.Name, w, name, r.summaryLine())
			}
		}
	}
	rep.Notes = notes(rep)
	rep.Targets = targets(rep)
	return rep, nil
}

// summaryLine is the progress line of a run.
func (r *RunResult) summaryLine() string {
	if r.Err != "" {
		return "error: " + r.Err
	}
	return fmt.Sprintf("%d compactions (%d emergency), validity %.1f%%, modified recall %.1f%%, read recall %.1f%%, engine %.2f ms/compaction, %.1fs",
		len(r.Compactions), r.Emergencies, 100*r.Validity(), 100*r.Recall.ModifiedShare(), 100*r.Recall.ReadShare(),
		r.EngineMillis.Mean, r.WallMillis/1000)
}

// loadSession reads a session file and describes it. A torn last line is
// tolerated: what was read before it is used.
func loadSession(path string) (*formats.Session, SessionInfo, error) {
	info := SessionInfo{Name: filepath.Base(path), Path: path}
	if st, err := os.Stat(path); err == nil {
		info.Bytes = st.Size()
	}
	s, err := formats.ReadFile(path)
	if err != nil && (s == nil || !errors.Is(err, formats.ErrTornLine)) {
		return nil, info, fmt.Errorf("eval: read session: %w", err)
	}
	info.Format = s.Format
	info.Messages = len(s.Messages)
	info.AgentCompactions = len(s.AgentCompactions)
	for i := range s.Messages {
		if s.Messages[i].Usage != nil && s.Messages[i].Role == abi.RoleAssistant {
			info.UsageReports++
		}
	}
	info.Calls = len(gatePoints(s.Messages))
	for i := range s.Messages {
		n := 0
		for _, b := range s.Messages[i].Content {
			n += utf8.RuneCountInString(b.Text) + len(b.Input)
		}
		info.Tokens += (n + 3) / 4
		if s.Messages[i].Pinned {
			info.PinnedTokens += (n + 3) / 4
		}
	}
	for _, m := range s.Live() {
		n := 0
		for _, b := range m.Content {
			n += utf8.RuneCountInString(b.Text) + len(b.Input)
		}
		info.LiveTokens += (n + 3) / 4
	}
	return s, info, nil
}

// gatePoints are the indexes before which the agent called the model: each
// assistant message, and len(msgs) when the session ends with tool results.
func gatePoints(msgs []host.Message) []int {
	var pts []int
	for i := range msgs {
		if msgs[i].Role == abi.RoleAssistant {
			pts = append(pts, i)
		}
	}
	if n := len(msgs); n > 0 && hasToolResult(&msgs[n-1]) {
		pts = append(pts, n)
	}
	return pts
}

func hasToolResult(m *host.Message) bool {
	for _, b := range m.Content {
		if b.Type == abi.BlockToolResult {
			return true
		}
	}
	return false
}

// largestSession is the session of the most bytes.
func largestSession(rep *Report) string {
	infos := slices.Clone(rep.Sessions)
	sort.SliceStable(infos, func(i, j int) bool { return infos[i].Bytes > infos[j].Bytes })
	for _, s := range infos {
		if s.Err == "" {
			return s.Name
		}
	}
	return ""
}
