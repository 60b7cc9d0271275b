package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/tenant"
)

// Defaults and bounds of Quota.
const (
	DefaultTenantMaxSessions       = 1000
	DefaultTenantMaxBytes    int64 = 1 << 30
	// MaxTenantSessions bounds Quota.MaxSessions: a tenant's ledger,
	// about 200 bytes a session, must stay well within a store's
	// session size limit (16 MiB by default).
	MaxTenantSessions = 50_000
)

// Quota bounds what one tenant keeps in the store. When a write would
// take a tenant past it, the tenant's own sessions written longest ago
// are removed until the write fits; never another tenant's. A session
// that alone is over MaxBytes is refused (507, quota_exceeded). A zero
// field means its default.
type Quota struct {
	// MaxSessions bounds a tenant's sessions (DefaultTenantMaxSessions).
	MaxSessions int
	// MaxBytes bounds the bytes of a tenant's sessions, their logs and
	// options together (DefaultTenantMaxBytes).
	MaxBytes int64
}

// usage is a tenant's ledger, kept in the store beside its sessions: the
// size and the last write of each of its sessions, by the client's ID.
// Servers that share the store share it; writes to it are made at the
// revision read, so two servers never both take the last place.
type usage struct {
	Sessions map[string]usageEntry `json:"sessions"`
}

type usageEntry struct {
	Bytes int64 `json:"bytes"`
	// Originals is the bytes of what the session's compactions folded,
	// kept beside it (see keepOriginals).
	Originals int64 `json:"originals,omitempty"`
	// Written is the Unix time in nanoseconds of the session's last
	// write.
	Written int64 `json:"written"`
}

// usageKey is the store's key of a tenant's ledger; no session key holds
// this prefix (session IDs start with a letter or digit and hold no '/').
func usageKey(t tenant.ID) string { return "quota/" + string(t) }

// readUsage reads t's ledger and its revision (0: none yet).
func (s *Server) readUsage(ctx context.Context, t tenant.ID) (*usage, int64, error) {
	u := &usage{Sessions: map[string]usageEntry{}}
	st, err := s.sessions.GetSession(ctx, usageKey(t))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return u, 0, nil
	case err != nil:
		return nil, 0, err
	}
	if err := json.Unmarshal(st.Messages, u); err != nil {
		// A ledger that does not read is started again: the sessions
		// enter it anew as they are written.
		s.log.Warn("tenant quota ledger does not read; starting it again", "tenant", t, "err", err)
		u.Sessions = map[string]usageEntry{}
	}
	if u.Sessions == nil {
		u.Sessions = map[string]usageEntry{}
	}
	return u, st.Revision, nil
}

// quotaError is the answer to a session that cannot fit its tenant's
// quota even alone.
func (s *Server) quotaError(ref sessionRef, size int64) *apiError {
	return errorf(http.StatusInsufficientStorage, CodeQuotaExceeded,
		"session %q would be %d bytes, over the %d bytes a token may keep (the server's --tenant-max-bytes)", ref.id, size, s.opts.Quota.MaxBytes)
}

// reserve records that ref is about to be written at size bytes, and
// makes room for it in its tenant's quota by removing the tenant's
// sessions written longest ago. It runs before the session's write, so
// that writers racing for the last place cannot both take it.
func (s *Server) reserve(ctx context.Context, ref sessionRef, size int64) *apiError {
	q := s.opts.Quota
	if size > q.MaxBytes {
		return s.quotaError(ref, size)
	}
	for attempt := 0; ; attempt++ {
		u, rev, err := s.readUsage(ctx, ref.tenant)
		if err != nil {
			return storeError(ctx, ref, err)
		}
		e := u.Sessions[ref.id]
		e.Bytes, e.Written = size, time.Now().UnixNano()
		u.Sessions[ref.id] = e
		victims := u.overflow(ref.id, q)
		if err := s.writeUsage(ctx, ref.tenant, u, rev); errors.Is(err, store.ErrConflict) && attempt < maxWriteAttempts {
			continue
		} else if err != nil {
			return storeError(ctx, ref, err)
		}
		s.evict(ctx, ref.tenant, victims)
		return nil
	}
}

// reserveOriginals records that ref's originals are about to grow by add
// bytes (or, with replace, to be add bytes), making room as reserve does.
// It refuses (false) originals that would take the session over the quota
// alone: the session goes on without them.
func (s *Server) reserveOriginals(ctx context.Context, ref sessionRef, add int64, replace bool) bool {
	q := s.opts.Quota
	for attempt := 0; ; attempt++ {
		u, rev, err := s.readUsage(ctx, ref.tenant)
		if err != nil {
			s.log.Warn("tenant quota: ledger not read for a session's originals", "tenant", ref.tenant, "err", err)
			return false
		}
		e := u.Sessions[ref.id]
		if replace {
			e.Originals = 0
		}
		if e.Bytes+e.Originals+add > q.MaxBytes {
			s.log.Warn("tenant quota: a compaction's originals are not kept, the session and they would be over the token's bytes", "tenant", ref.tenant, "session", ref.id, "max_bytes", q.MaxBytes)
			return false
		}
		e.Originals += add
		e.Written = time.Now().UnixNano()
		u.Sessions[ref.id] = e
		victims := u.overflow(ref.id, q)
		if err := s.writeUsage(ctx, ref.tenant, u, rev); errors.Is(err, store.ErrConflict) && attempt < maxWriteAttempts {
			continue
		} else if err != nil {
			s.log.Warn("tenant quota: ledger not written for a session's originals", "tenant", ref.tenant, "err", err)
			return false
		}
		s.evict(ctx, ref.tenant, victims)
		return true
	}
}

// evict removes the tenant's sessions victims, and their originals.
func (s *Server) evict(ctx context.Context, t tenant.ID, victims []string) {
	q := s.opts.Quota
	for _, id := range victims {
		err := s.sessions.DeleteSession(ctx, scopedKey(t, id))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("tenant quota: a session to remove stays", "tenant", t, "session", id, "err", err)
			continue
		}
		s.dropOriginals(ctx, scopedKey(t, id))
		s.log.Info("tenant quota: removed the tenant's session written longest ago", "tenant", t, "session", id,
			"max_sessions", q.MaxSessions, "max_bytes", q.MaxBytes)
	}
}

// overflow removes from u, and returns, the sessions other than keep
// written longest ago, until u fits q.
func (u *usage) overflow(keep string, q Quota) []string {
	var total int64
	var others []string
	for id, e := range u.Sessions {
		total += e.Bytes + e.Originals
		if id != keep {
			others = append(others, id)
		}
	}
	sort.Slice(others, func(i, j int) bool {
		a, b := u.Sessions[others[i]], u.Sessions[others[j]]
		if a.Written != b.Written {
			return a.Written < b.Written
		}
		return others[i] < others[j]
	})
	var victims []string
	for _, id := range others {
		if len(u.Sessions) <= q.MaxSessions && total <= q.MaxBytes {
			break
		}
		total -= u.Sessions[id].Bytes + u.Sessions[id].Originals
		delete(u.Sessions, id)
		victims = append(victims, id)
	}
	return victims
}

// release takes ref out of its tenant's ledger once it is deleted. A
// failure leaves the ledger counting a session that is gone, until the
// ledger makes room by removing it; it is logged, not answered.
func (s *Server) release(ctx context.Context, ref sessionRef) {
	for attempt := 0; attempt <= maxWriteAttempts; attempt++ {
		u, rev, err := s.readUsage(ctx, ref.tenant)
		if err != nil {
			s.log.Warn("tenant quota: ledger not updated after a delete", "tenant", ref.tenant, "err", err)
			return
		}
		if _, ok := u.Sessions[ref.id]; !ok {
			return
		}
		delete(u.Sessions, ref.id)
		err = s.writeUsage(ctx, ref.tenant, u, rev)
		if err == nil {
			return
		}
		if !errors.Is(err, store.ErrConflict) {
			s.log.Warn("tenant quota: ledger not updated after a delete", "tenant", ref.tenant, "err", err)
			return
		}
	}
}

// writeUsage writes t's ledger at revision rev.
func (s *Server) writeUsage(ctx context.Context, t tenant.ID, u *usage, rev int64) error {
	b, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("encode the quota ledger: %w", err)
	}
	_, err = s.sessions.PutSession(ctx, &store.Session{ID: usageKey(t), Messages: b}, rev)
	return err
}
