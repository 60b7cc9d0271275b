package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// initialBodyBuffer is the most a declared Content-Length reserves before
// the bytes arrive: a client may declare 32 MiB and send one byte.
const initialBodyBuffer = 64 << 10

// errBodyTimeout: the client did not send its body in time.
var errBodyTimeout = errors.New("the request body did not arrive in time")

// deadlineBody reads a request body under read deadlines set on the
// client's connection: no byte for idle ends the read, and so does
// passing until (when set). Once the body ends, the connection's deadline
// is cleared: the server goes on reading it to notice a client that goes
// away, and a deadline left behind would end the answer's stream.
type deadlineBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	idle  time.Duration
	until time.Time
	// unsupported: the connection takes no deadline (HTTP/2 in some
	// configurations, a test's recorder); the server's own timeouts apply.
	// Atomic, with done and timedOut: a forwarded body is read by the
	// transport while the handler may already be finishing.
	unsupported atomic.Bool
	done        atomic.Bool
	timedOut    atomic.Bool
}

func newDeadlineBody(w http.ResponseWriter, body io.ReadCloser, idle time.Duration) *deadlineBody {
	return &deadlineBody{ReadCloser: body, rc: http.NewResponseController(w), idle: idle}
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.done.Load() {
		return b.ReadCloser.Read(p)
	}
	if !b.unsupported.Load() {
		d := time.Now().Add(b.idle)
		if !b.until.IsZero() && b.until.Before(d) {
			d = b.until
		}
		if err := b.rc.SetReadDeadline(d); err != nil {
			b.unsupported.Store(true)
		}
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			// The deadline stays, passed: the server's discarding of
			// the unread rest then fails at once and the connection is
			// closed after the answer, instead of waiting on the client.
			b.timedOut.Store(true)
			err = errBodyTimeout
		}
		b.done.Store(true)
		if !b.unsupported.Load() && !b.timedOut.Load() {
			// The server now reads on to notice a client that goes away.
			b.rc.SetReadDeadline(time.Time{})
		}
	}
	return n, err
}

// finish is called when the handler is done. A body not read to its end
// keeps a deadline one idle period away: the server discards what is left
// of it before reusing the connection, and a client that stalls must not
// hold that up for ever. (The server sets its own deadline for the next
// request's headers.)
func (b *deadlineBody) finish() {
	if !b.done.Load() && !b.unsupported.Load() {
		b.rc.SetReadDeadline(time.Now().Add(b.idle))
	}
}

// readBounded reads at most limit bytes; whole is false when there was
// more. The buffer grows with what arrives, never with what the client
// declared: a declared length only sizes it up to initialBodyBuffer.
func readBounded(r io.Reader, declared, limit int64) (data []byte, whole bool, err error) {
	if r == nil {
		return nil, true, nil
	}
	buf := bytes.NewBuffer(make([]byte, 0, min(max(declared, 0), limit, initialBodyBuffer)+bytes.MinRead))
	_, err = buf.ReadFrom(io.LimitReader(r, limit+1))
	data = buf.Bytes()
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > limit {
		return data, false, nil
	}
	return data, true, nil
}
