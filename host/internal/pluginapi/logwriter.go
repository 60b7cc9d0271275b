package pluginapi

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
)

// maxLogLine bounds one logged line so a plugin printing without newlines
// cannot grow the host's memory.
const maxLogLine = 8 << 10

// LineWriter is an io.Writer that logs each line written to it, for a
// plugin's stdout and stderr. Lines past the stream limits (MaxStreamBytes
// and MaxStreamLines per StreamWindow) are dropped and counted; the count
// is logged when the next window begins, or by Flush.
type LineWriter struct {
	Logger *slog.Logger
	Level  slog.Level

	mu     sync.Mutex
	buf    []byte
	budget *LogBudget
}

// Write implements io.Writer. It never fails.
func (w *LineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxLogLine - len(w.buf)
			if len(p) > room {
				w.buf = append(w.buf, p[:room]...)
				w.flush()
				p = p[room:]
				continue
			}
			w.buf = append(w.buf, p...)
			break
		}
		w.buf = append(w.buf, p[:i]...)
		w.flush()
		p = p[i+1:]
	}
	return n, nil
}

func (w *LineWriter) flush() {
	if w.budget == nil {
		w.budget = NewStreamLogBudget()
	}
	if len(w.buf) > 0 && w.Logger != nil && w.budget.Allow(w.Logger, len(w.buf)+1) {
		w.Logger.Log(context.Background(), w.Level, string(w.buf))
	}
	w.buf = w.buf[:0]
}

// Flush logs the note of the lines dropped so far, if any.
func (w *LineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.budget != nil {
		w.budget.Flush(w.Logger)
	}
}
