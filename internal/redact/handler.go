package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler wraps h so that every record it passes on has its message and
// its attributes' values redacted as String does: errors and values
// formatted as text included, within groups too. A log line then cannot
// carry a credential that an upstream body, an error or a caller's input
// quoted, whichever code wrote it.
// A handler that already redacts is not wrapped twice: known is added to
// the values it hides.
func Handler(h slog.Handler, known ...string) *LogHandler {
	if r, ok := h.(*LogHandler); ok {
		return r.WithKnown(known...)
	}
	return &LogHandler{next: h, known: known}
}

// LogHandler is the slog.Handler Handler returns.
type LogHandler struct {
	next  slog.Handler
	known []string
}

// WithKnown returns a handler that also hides the exact values in known:
// the secrets of one request, for keys of no recognizable shape that an
// upstream quotes back.
func (h *LogHandler) WithKnown(known ...string) *LogHandler {
	if len(known) == 0 {
		return h
	}
	return &LogHandler{next: h.next, known: append(append([]string(nil), h.known...), known...)}
}

func (h *LogHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message, h.known...), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &LogHandler{next: h.next.WithAttrs(clean), known: h.known}
}

func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{next: h.next.WithGroup(name), known: h.known}
}

// attr is a with its value redacted; numbers, booleans, times and
// durations hold no credential and pass as they are.
func (h *LogHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, String(v.String(), h.known...))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]any, len(group))
		for i, g := range group {
			clean[i] = h.attr(g)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case fmt.Stringer:
			s = x.String()
		case []byte:
			s = string(x)
		default:
			s = fmt.Sprint(x)
		}
		if r := String(s, h.known...); r != s {
			return slog.String(a.Key, r)
		}
		return slog.Attr{Key: a.Key, Value: v}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

var _ slog.Handler = (*LogHandler)(nil)
