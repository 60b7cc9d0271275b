package procrt

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// goPluginExited is the message go-plugin logs when the process ends.
const goPluginExited = "plugin process exited"

// newHCLogger returns an hclog.Logger, the logger go-plugin takes, whose
// lines go to w. hclog writes JSON lines; each is decoded back into a
// slog record with its level, message and fields.
func newHCLogger(w *slogWriter) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "plugin",
		Level:      hclog.Debug,
		JSONFormat: true,
		Output:     w,
	})
}

// slogWriter logs a plugin process's stderr, which go-plugin passes
// through hclog, within the limits of budget: a process printing in a
// loop must not fill the host's log.
type slogWriter struct {
	logger *slog.Logger
	budget *pluginapi.LogBudget
	mu     sync.Mutex
	buf    []byte
	// killing is set when the host stops the process itself: go-plugin
	// then reports the exit it caused ("signal: killed") as an error,
	// which is logged at debug level instead.
	killing atomic.Bool
}

// flush logs the note of the lines dropped so far, if any.
func (w *slogWriter) flush() { w.budget.Flush(w.logger) }

func (w *slogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *slogWriter) emit(line []byte) {
	if !w.budget.Allow(w.logger, len(line)) {
		return
	}
	var fields map[string]any
	if err := json.Unmarshal(line, &fields); err != nil {
		w.logger.Info(string(line))
		return
	}
	msg, _ := fields["@message"].(string)
	level := slog.LevelInfo
	switch fields["@level"] {
	case "trace", "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	if msg == goPluginExited && w.killing.Load() {
		level = slog.LevelDebug
	}
	attrs := make([]slog.Attr, 0, len(fields))
	for k, v := range fields {
		switch k {
		case "@message", "@level", "@timestamp":
			continue
		}
		attrs = append(attrs, slog.Any(k, v))
	}
	w.logger.LogAttrs(context.Background(), level, msg, attrs...)
}
