package cli

import (
	"context"
	"fmt"
	"io"
	"os"
)

// defaultMaxInputBytes bounds what a command reads unless
// --max-input-bytes or max_input_bytes says otherwise: far above any real
// session, far below what would exhaust memory.
const defaultMaxInputBytes = 256 << 20

// maxInputBytes is the input limit in force.
func (a *app) maxInputBytes() int64 {
	return pick(pick(a.flags.maxInputBytes, a.cfg.MaxInputBytes), defaultMaxInputBytes)
}

// readInput reads path ("-" or "" for stdin) whole, up to the input
// limit. It refuses what is not a file, a pipe or stdin (a directory, a
// device such as /dev/zero, a socket), and it stops when ctx ends (SIGINT
// or SIGTERM), even while a pipe keeps it waiting.
func (a *app) readInput(ctx context.Context, path string) ([]byte, error) {
	limit := a.maxInputBytes()
	var r io.Reader = a.g.io.In
	if path == "" {
		path = "-"
	}
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err // an *fs.PathError naming the file: exit 3
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		switch m := st.Mode(); {
		case m.IsRegular():
			if st.Size() > limit {
				return nil, tooLarge(path, limit)
			}
		case m&os.ModeNamedPipe != 0:
		default:
			return nil, &inputError{Path: path, Msg: fmt.Sprintf("is a %s, not a session file; pass a regular file, or pipe the input on stdin", kindOf(m))}
		}
		r = f
	}
	a.log.Debug("reading input", "path", displayPath(path), "max_input_bytes", limit)
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := io.ReadAll(io.LimitReader(ctxReader{ctx, r}, limit+1))
		done <- result{data, err}
	}()
	select {
	case <-ctx.Done():
		// A read blocked on a pipe cannot be cancelled; the process is
		// about to exit, which ends it.
		return nil, fmt.Errorf("reading %s: %w", displayPath(path), ctx.Err())
	case res := <-done:
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("reading %s: %w", displayPath(path), ctx.Err())
		case res.err != nil:
			return nil, &inputError{Path: path, Msg: "read failed", Err: res.err}
		case int64(len(res.data)) > limit:
			return nil, tooLarge(path, limit)
		}
		return res.data, nil
	}
}

func tooLarge(path string, limit int64) error {
	return &inputError{Path: path, Msg: fmt.Sprintf("the input is over the %s limit; raise it with --max-input-bytes or max_input_bytes in the config", bytesText(limit))}
}

// ctxReader stops a read loop once ctx ends, so a fast endless source
// (a device, a pipe that never closes but keeps writing) stops too.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func kindOf(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// bytesText is n in the largest binary unit that divides it, for limits.
func bytesText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
