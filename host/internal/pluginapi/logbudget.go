package pluginapi

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Limits of what a plugin may write into the host's log. A plugin that
// logs in a loop must not fill the disk or drown the host's own lines:
// past a limit its lines are dropped and counted, and one note says how
// much was dropped.
const (
	// MaxLogBytesPerCall and MaxLogLinesPerCall bound the log lines (the
	// log host import, Host.Log) of one plugin call.
	MaxLogBytesPerCall = 1 << 20
	MaxLogLinesPerCall = 10_000
	// MaxStreamBytes and MaxStreamLines bound what one plugin process's
	// stderr, or one wasm instance's stdout and stderr, may log per
	// StreamWindow: these streams belong to no single call.
	MaxStreamBytes = 1 << 20
	MaxStreamLines = 10_000
	StreamWindow   = time.Minute
)

// LogBudget counts the log lines of one call, or of one stream over a
// window of time, and what was dropped past its limits. It is safe for
// concurrent use.
type LogBudget struct {
	maxBytes, maxLines int
	window             time.Duration // zero: the budget never refills

	mu                         sync.Mutex
	start                      time.Time
	bytes, lines               int
	droppedBytes, droppedLines int
}

// NewCallLogBudget returns the budget of one plugin call.
func NewCallLogBudget() *LogBudget {
	return &LogBudget{maxBytes: MaxLogBytesPerCall, maxLines: MaxLogLinesPerCall}
}

// NewStreamLogBudget returns the budget of an output stream, refilled
// every StreamWindow.
func NewStreamLogBudget() *LogBudget {
	return &LogBudget{maxBytes: MaxStreamBytes, maxLines: MaxStreamLines, window: StreamWindow}
}

// Allow counts a line of n bytes and reports whether it may be logged.
// When a new window begins after lines were dropped, the note of the
// last window is logged to logger first.
func (b *LogBudget) Allow(logger *slog.Logger, n int) bool {
	b.mu.Lock()
	if b.window > 0 {
		now := time.Now()
		if b.start.IsZero() || now.Sub(b.start) >= b.window {
			b.start, b.bytes, b.lines = now, 0, 0
			b.noteLocked(logger)
		}
	}
	ok := b.bytes+n <= b.maxBytes && b.lines < b.maxLines
	if ok {
		b.bytes += n
		b.lines++
	} else {
		b.droppedBytes += n
		b.droppedLines++
	}
	b.mu.Unlock()
	return ok
}

// Flush logs the note of what was dropped, if anything was, and starts
// counting drops afresh.
func (b *LogBudget) Flush(logger *slog.Logger) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.noteLocked(logger)
}

// Dropped reports the bytes and lines dropped since the last note.
func (b *LogBudget) Dropped() (bytes, lines int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.droppedBytes, b.droppedLines
}

func (b *LogBudget) noteLocked(logger *slog.Logger) {
	if b.droppedLines == 0 {
		return
	}
	if logger != nil {
		// Logged past the handler's budget check: the note must get out.
		logger.LogAttrs(withoutBudget(context.Background()), slog.LevelWarn, "plugin log over its limit",
			slog.String("dropped", formatDropped(b.droppedBytes, b.droppedLines)),
			slog.Int("limit_bytes", b.maxBytes), slog.Int("limit_lines", b.maxLines))
	}
	b.droppedBytes, b.droppedLines = 0, 0
}

func formatDropped(bytes, lines int) string {
	return fmt.Sprintf("%d bytes / %d lines of plugin log dropped", bytes, lines)
}

type budgetKey struct{}

// WithLogBudget returns ctx carrying b: the log lines a plugin writes
// during a call made with ctx are counted against b by a logger whose
// handler is a BudgetHandler.
func WithLogBudget(ctx context.Context, b *LogBudget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

func withoutBudget(ctx context.Context) context.Context {
	return context.WithValue(ctx, budgetKey{}, (*LogBudget)(nil))
}

// LogBudgetOf returns the budget ctx carries, or nil.
func LogBudgetOf(ctx context.Context) *LogBudget {
	b, _ := ctx.Value(budgetKey{}).(*LogBudget)
	return b
}

// BudgetHandler is the slog.Handler of the logger the plugin runtimes log
// a plugin's lines to: a record logged with a context that carries a
// LogBudget is counted against it and dropped past its limits. Records
// without one (the host's own lines) pass.
type BudgetHandler struct {
	slog.Handler
}

// Handle implements slog.Handler.
func (h BudgetHandler) Handle(ctx context.Context, r slog.Record) error {
	if b := LogBudgetOf(ctx); b != nil && !b.Allow(nil, len(r.Message)) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h BudgetHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return BudgetHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h BudgetHandler) WithGroup(name string) slog.Handler {
	return BudgetHandler{h.Handler.WithGroup(name)}
}

// BudgetLogger returns logger with its handler wrapped in a BudgetHandler,
// once.
func BudgetLogger(logger *slog.Logger) *slog.Logger {
	if _, ok := logger.Handler().(BudgetHandler); ok {
		return logger
	}
	return slog.New(BudgetHandler{logger.Handler()})
}
