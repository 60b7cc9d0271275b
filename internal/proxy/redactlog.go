package proxy

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/compact-host/compact-host/internal/redact"
)

// redactHandler hides credentials in every record it passes on: the
// message and every attribute, nested groups and errors included. known
// are the exact secrets of one request, for keys of no recognizable shape
// that an upstream quotes back.
type redactHandler struct {
	next  slog.Handler
	known []string
}

// newRedactHandler wraps h, unless it already is a redactHandler.
func newRedactHandler(h slog.Handler) *redactHandler {
	if r, ok := h.(*redactHandler); ok {
		return r
	}
	return &redactHandler{next: h}
}

// withKnown returns a handler that also hides the values in known.
func (h *redactHandler) withKnown(known ...string) *redactHandler {
	if len(known) == 0 {
		return h
	}
	return &redactHandler{next: h.next, known: append(append([]string(nil), h.known...), known...)}
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *redactHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, redact.String(r.Message, h.known...), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &redactHandler{next: h.next.WithAttrs(clean), known: h.known}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{next: h.next.WithGroup(name), known: h.known}
}

// attr is a with every string in its value redacted. A value of another
// kind that prints as text (an error, a header map) becomes that text
// when something in it had to be hidden.
func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, redact.String(v.String(), h.known...))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]any, len(group))
		for i, g := range group {
			clean[i] = h.attr(g)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		var s string
		if err, ok := v.Any().(error); ok {
			s = err.Error()
		} else {
			s = fmt.Sprint(v.Any())
		}
		if r := redact.String(s, h.known...); r != s {
			return slog.String(a.Key, r)
		}
		if _, isErr := v.Any().(error); isErr {
			return slog.String(a.Key, s)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

var _ slog.Handler = (*redactHandler)(nil)
