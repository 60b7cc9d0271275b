package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of every Sessions implementation, besides ErrNotFound and
// ErrUnavailable. Implementations wrap them with %w.
var (
	// ErrConflict: the session's revision was not the one the caller
	// named; nothing was written. Reading the session again and
	// redoing the change is safe.
	ErrConflict = errors.New("store: session revision conflict")
	// ErrSessionTooLarge: the write would take the session over the
	// store's size limit; nothing was written.
	ErrSessionTooLarge = errors.New("store: session over the size limit")
)

// AnyRevision, as a write's ifRevision, writes whatever the session's
// current revision; 0 writes only a session that does not exist yet.
const AnyRevision int64 = -1

// DefaultMaxSessionBytes bounds a session's Messages and Settings
// together, unless a store is told otherwise: a compacted context stays
// far below it, and a session that never compacts must not grow without
// end.
const DefaultMaxSessionBytes = 16 << 20

// Session is a conversation the service keeps by ID, so that a client
// sends only its new messages. The store treats Messages and Settings as
// opaque bytes; the service keeps a session log in Messages and the
// session's options, as JSON, in Settings.
type Session struct {
	ID string `json:"id"`
	// Revision counts the writes since the session was created (1 after
	// the first): a writer names the revision it read, and the write
	// fails with ErrConflict if another came first.
	Revision int64 `json:"revision"`
	// Messages is the conversation; AppendSession adds to its end.
	Messages []byte `json:"messages"`
	Settings []byte `json:"settings,omitempty"`
	// LatestRecord is the Key of the Record of the session's newest
	// compaction, "" before the first; Compactions counts them.
	LatestRecord string    `json:"latest_record,omitempty"`
	Compactions  int       `json:"compactions,omitempty"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// Sessions keeps sessions by ID. It is an interface apart from Store
// because the proxy needs records and locks only: a Store need not keep
// sessions, and the service asks its store for this interface. The
// concurrency and error rules of Store apply; in addition every write
// is atomic with its revision check, across the processes that share
// the backend.
type Sessions interface {
	// GetSession returns the session, or ErrNotFound.
	GetSession(ctx context.Context, id string) (*Session, error)
	// PutSession replaces (or creates) s.ID with s's Messages, Settings,
	// LatestRecord and Compactions, if its revision is ifRevision
	// (AnyRevision: whatever it is; 0: only if it does not exist). It
	// returns the new revision and sets UpdatedAt to now.
	PutSession(ctx context.Context, s *Session, ifRevision int64) (int64, error)
	// AppendSession adds data to the end of the session's Messages, if
	// its revision is ifRevision (AnyRevision: whatever it is), and
	// returns the new revision. It fails with ErrNotFound for a session
	// that does not exist: it never creates one.
	AppendSession(ctx context.Context, id string, data []byte, ifRevision int64) (int64, error)
	// DeleteSession removes the session; ErrNotFound if there was none.
	DeleteSession(ctx context.Context, id string) error
}

// CheckSession reports whether a session write can be made: an ID of 1
// to MaxIDBytes bytes and a known ifRevision.
func CheckSession(id string, ifRevision int64) error {
	if id == "" {
		return errors.New("store: a session needs an ID")
	}
	if ifRevision < AnyRevision {
		return fmt.Errorf("store: ifRevision %d: want a revision, 0 (create) or AnyRevision", ifRevision)
	}
	return CheckID("session", id)
}

// sessionSize is what the size limit counts.
func sessionSize(s *Session) int { return len(s.Messages) + len(s.Settings) }

func tooLarge(id string, size, limit int) error {
	return fmt.Errorf("session %q would be %d bytes, over the limit of %d (max_session_bytes): %w", id, size, limit, ErrSessionTooLarge)
}

func conflict(id string, want, have int64) error {
	if have == 0 {
		return fmt.Errorf("session %q exists at no revision, not %d: %w", id, want, ErrConflict)
	}
	return fmt.Errorf("session %q is at revision %d, not %d: %w", id, have, want, ErrConflict)
}

// checkRevision applies a write's ifRevision to the current revision
// (0: the session does not exist).
func checkRevision(id string, ifRevision, current int64) error {
	if ifRevision == AnyRevision || ifRevision == current {
		return nil
	}
	if ifRevision == 0 {
		return fmt.Errorf("session %q already exists, at revision %d: %w", id, current, ErrConflict)
	}
	return conflict(id, ifRevision, current)
}

func cloneSession(s *Session) *Session {
	c := *s
	c.Messages = append([]byte(nil), s.Messages...)
	c.Settings = append([]byte(nil), s.Settings...)
	return &c
}
