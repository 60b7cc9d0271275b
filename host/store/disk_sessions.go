package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/compact-host/compact-host/internal/atomicfile"
)

const sessionFormat = 1

// sessionHeader is a session file's first line; the Messages follow the
// newline as raw bytes, as a record's Replacement does, and their length
// in the header tells a whole file from a cut one.
type sessionHeader struct {
	Format        int      `json:"format"`
	MessagesBytes int      `json:"messages_bytes"`
	Session       *Session `json:"session"`
}

func encodeSession(s *Session) ([]byte, error) {
	bare := *s
	bare.Messages = nil
	head, err := json.Marshal(sessionHeader{Format: sessionFormat, MessagesBytes: len(s.Messages), Session: &bare})
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(head)+1+len(s.Messages))
	return append(append(append(b, head...), '\n'), s.Messages...), nil
}

func decodeSession(b []byte, id string) (*Session, error) {
	head, rest, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return nil, errors.New("no header line")
	}
	var h sessionHeader
	if err := json.Unmarshal(head, &h); err != nil {
		return nil, err
	}
	switch {
	case h.Format != sessionFormat:
		return nil, fmt.Errorf("format %d, this version reads %d", h.Format, sessionFormat)
	case h.Session == nil || h.Session.ID != id:
		return nil, errors.New("the file holds another session")
	case h.MessagesBytes != len(rest):
		return nil, fmt.Errorf("%d message bytes, the header says %d", len(rest), h.MessagesBytes)
	}
	h.Session.Messages = rest
	return h.Session, nil
}

func (d *Disk) sessionPath(id string) string {
	return filepath.Join(d.dir, "sessions", hashName(id))
}

// sessionFileLimit allows for the header and the escapes of Settings.
func (d *Disk) sessionFileLimit() int64 {
	return int64(d.opts.MaxSessionBytes)*2 + 64<<10
}

// GetSession reads the file without the guard: writes rename a whole
// file into place, so a reader sees the old session or the new one.
func (d *Disk) GetSession(ctx context.Context, id string) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckSession(id, AnyRevision); err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return d.readSession(id)
}

func (d *Disk) readSession(id string) (*Session, error) {
	path := d.sessionPath(id)
	b, err := readLimited(path, d.sessionFileLimit())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("session %q: %w", id, ErrNotFound)
	case errors.Is(err, errTooLarge):
		return nil, d.corrupt(path, err)
	case err != nil:
		return nil, d.unavailable(err)
	}
	s, err := decodeSession(b, id)
	if err != nil {
		return nil, d.corrupt(path, err)
	}
	return s, nil
}

// current is the session as a write under the guard sees it: nil when
// there is none, or when its file is corrupt (the write replaces it).
func (d *Disk) current(id string) (*Session, error) {
	s, err := d.readSession(id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return s, err
}

func (d *Disk) PutSession(ctx context.Context, s *Session, ifRevision int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := CheckSession(s.ID, ifRevision); err != nil {
		return 0, err
	}
	if n := sessionSize(s); n > d.opts.MaxSessionBytes {
		return 0, tooLarge(s.ID, n, d.opts.MaxSessionBytes)
	}
	release, err := d.lockGuard(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	old, err := d.current(s.ID)
	if err != nil {
		return 0, err
	}
	var rev int64
	if old != nil {
		rev = old.Revision
	}
	if err := checkRevision(s.ID, ifRevision, rev); err != nil {
		return 0, err
	}
	if old == nil {
		d.evictSessions()
	}
	c := *s
	c.Revision, c.UpdatedAt = rev+1, time.Now().UTC()
	return c.Revision, d.writeSession(&c)
}

func (d *Disk) AppendSession(ctx context.Context, id string, data []byte, ifRevision int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := CheckSession(id, ifRevision); err != nil {
		return 0, err
	}
	release, err := d.lockGuard(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	s, err := d.current(id)
	if err != nil {
		return 0, err
	}
	if s == nil {
		return 0, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	if err := checkRevision(id, ifRevision, s.Revision); err != nil {
		return 0, err
	}
	if n := sessionSize(s) + len(data); n > d.opts.MaxSessionBytes {
		return 0, tooLarge(id, n, d.opts.MaxSessionBytes)
	}
	// The whole file is rewritten: an append in place could be cut by
	// a crash, and the rename keeps readers off the guard.
	s.Messages = append(s.Messages, data...)
	s.Revision++
	s.UpdatedAt = time.Now().UTC()
	return s.Revision, d.writeSession(s)
}

func (d *Disk) writeSession(s *Session) error {
	b, err := encodeSession(s)
	if err != nil {
		return fmt.Errorf("store: encode session %q: %w", s.ID, err)
	}
	path := d.sessionPath(s.ID)
	if err := atomicfile.Write(path, 0o600, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return d.unavailable(err)
	}
	d.stampSession(path)
	return nil
}

// stampSession sets a session file's modification time to a time later
// than any this store gave before. Eviction removes the sessions updated
// longest ago by that time, and the kernel stamps files from a coarse
// clock: two writes a few milliseconds apart could carry the same time
// and be evicted in either order.
func (d *Disk) stampSession(path string) {
	d.stampMu.Lock()
	now := time.Now()
	if !now.After(d.lastStamp) {
		now = d.lastStamp.Add(time.Microsecond)
	}
	d.lastStamp = now
	d.stampMu.Unlock()
	if err := os.Chtimes(path, now, now); err != nil {
		d.opts.Logger.Warn("store: stamp session", "file", path, "err", err)
	}
}

func (d *Disk) DeleteSession(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckSession(id, AnyRevision); err != nil {
		return err
	}
	release, err := d.lockGuard(ctx)
	if err != nil {
		return err
	}
	defer release()
	err = os.Remove(d.sessionPath(id))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("session %q: %w", id, ErrNotFound)
	case err != nil:
		return d.unavailable(err)
	}
	return nil
}

// evictSessions makes room for one more session when MaxSessions are
// kept, removing those updated longest ago, as Redis lets idle sessions
// expire. It runs under the guard, only when a session is created, so
// an append never lists the directory. Temporary files that crashed
// writers left go too.
func (d *Disk) evictSessions() {
	dir := filepath.Join(d.dir, "sessions")
	entries, err := os.ReadDir(dir)
	if err != nil {
		d.opts.Logger.Warn("store: list sessions for eviction", "dir", dir, "err", err)
		return
	}
	type file struct {
		name string
		mod  time.Time
	}
	var files []file
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		if strings.HasPrefix(e.Name(), ".") {
			if time.Since(info.ModTime()) > 10*time.Minute {
				os.Remove(filepath.Join(dir, e.Name()))
			}
			continue
		}
		files = append(files, file{e.Name(), info.ModTime()})
	}
	if len(files) < d.opts.MaxSessions {
		return
	}
	slices.SortFunc(files, func(a, b file) int { return a.mod.Compare(b.mod) })
	for _, f := range files[:len(files)-d.opts.MaxSessions+1] {
		path := filepath.Join(dir, f.name)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.opts.Logger.Warn("store: evict session", "file", path, "err", err)
			continue
		}
		d.opts.Logger.Info("store: removed the session updated longest ago to keep max_sessions", "file", path)
	}
}

var _ Sessions = (*Disk)(nil)
