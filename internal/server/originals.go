package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/store"
)

// The originals of a session: a session's log keeps only what its
// context needs, so each compaction's folded messages, and its summary
// after them, are appended to a second entry of the store, which
// GET /v1/sessions/{id}/originals returns with the current context for
// `compact-host mcp --session` to recall the summary's markers from. The
// entry is bound by the store's size limit of a session; past it, a
// compaction's originals are not kept (logged), and its markers do not
// resolve. They count in the tenant's quota with the session, and go
// with it: a PUT starts them anew, a DELETE or the tenant's quota
// removes them.

const (
	originalsPath    = "/originals"
	originalsPattern = "/v1/sessions/{id}/originals"
)

// SessionOriginals is the answer of GET /v1/sessions/{id}/originals.
type SessionOriginals struct {
	ID       string `json:"id"`
	Revision int64  `json:"revision"`
	// Messages is a JSON array of canonical messages, each once: what the
	// session's compactions folded, in order, each compaction's summary
	// after what it folded, then the rest of the current context.
	Messages json.RawMessage `json:"messages"`
}

// originalsKey is the store's key of the originals of the session key;
// no session key holds this prefix (session IDs hold no '/').
func originalsKey(key string) string { return "originals/" + key }

// keepOriginals appends to ref's originals what compaction c folded out
// of sess, and its summary; replace (a PUT) starts them anew, and with
// no compaction removes them. A failure loses only the recall of c's
// markers: it is logged, and the session's write goes on.
func (s *Server) keepOriginals(ctx context.Context, ref sessionRef, sess *host.Session, c *host.Compaction, summary abi.Message, replace bool) {
	key := originalsKey(ref.key)
	if c == nil {
		if replace {
			s.reserveOriginals(ctx, ref, 0, true)
			s.dropOriginals(ctx, ref.key)
		}
		return
	}
	kept := map[string]bool{}
	for _, m := range sess.Context() {
		kept[m.ID] = true
	}
	var folded []abi.Message
	for _, m := range sess.Messages() {
		if !kept[m.ID] && !m.Summary {
			folded = append(folded, m)
		}
	}
	summary.ID = "summary-" + c.ID
	lines, err := entryLines(append(folded, summary))
	if err == nil && !s.reserveOriginals(ctx, ref, int64(len(lines)), replace) {
		// Over the tenant's quota: logged there.
		if replace {
			s.dropOriginals(ctx, ref.key)
		}
		return
	}
	if err == nil {
		if replace {
			_, err = s.sessions.PutSession(ctx, &store.Session{ID: key, Messages: lines}, store.AnyRevision)
		} else if _, err = s.sessions.AppendSession(ctx, key, lines, store.AnyRevision); errors.Is(err, store.ErrNotFound) {
			_, err = s.sessions.PutSession(ctx, &store.Session{ID: key, Messages: lines}, 0)
		}
	}
	if err != nil {
		s.log.Warn("the originals a compaction folded are not kept: its markers will not resolve", "session", ref.id, "tenant", ref.tenant, "compaction", c.ID, "err", err)
	}
}

// dropOriginals removes the originals of the session key, after the
// session itself.
func (s *Server) dropOriginals(ctx context.Context, key string) {
	if err := s.sessions.DeleteSession(ctx, originalsKey(key)); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("session originals not removed", "err", err)
	}
}

// getOriginals serves GET /v1/sessions/{id}/originals. Its ETag is the
// revisions of the session and of its originals, so that a reader
// (compact-host mcp) that has them gets 304.
func (s *Server) getOriginals(w http.ResponseWriter, r *http.Request, _ []byte) *apiError {
	ref, aerr := sessionRefOf(r)
	if aerr != nil {
		return aerr
	}
	ctx := r.Context()
	// The revisions first: an unchanged session is answered 304 without
	// replaying its log.
	cur, err := s.sessions.GetSession(ctx, ref.key)
	if err != nil {
		return storeError(ctx, ref, err)
	}
	archived := &store.Session{}
	switch st, err := s.sessions.GetSession(ctx, originalsKey(ref.key)); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return storeError(ctx, ref, err)
	default:
		archived = st
	}
	etag := func(rev int64) string {
		return `"` + strconv.FormatInt(rev, 10) + "." + strconv.FormatInt(archived.Revision, 10) + `"`
	}
	if r.Header.Get("If-None-Match") == etag(cur.Revision) {
		w.Header().Set("ETag", etag(cur.Revision))
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	ld, aerr := s.load(ctx, ref)
	if aerr != nil {
		return aerr
	}
	defer ld.session.Close()
	w.Header().Set("ETag", etag(ld.stored.Revision))
	// Each message is given once, whatever the store holds (the
	// summary is in the originals and in the context).
	seen := map[string]bool{}
	var msgs []abi.Message
	add := func(m abi.Message) {
		if m.ID == "" || !seen[m.ID] {
			seen[m.ID] = true
			msgs = append(msgs, m)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(archived.Messages))
	sc.Buffer(nil, len(archived.Messages)+1)
	for sc.Scan() {
		var e host.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Message == nil {
			return errorf(http.StatusInternalServerError, CodeInternal, "session %q: its stored originals do not read", ref.id)
		}
		add(*e.Message)
	}
	for _, m := range ld.session.Context() {
		add(m)
	}
	body, err := json.Marshal(msgs)
	if err != nil {
		return errorf(http.StatusInternalServerError, CodeInternal, "encode the originals: %v", err)
	}
	writeJSON(w, http.StatusOK, SessionOriginals{ID: ref.id, Revision: ld.stored.Revision, Messages: body})
	return nil
}
