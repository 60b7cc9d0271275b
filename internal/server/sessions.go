package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/cachestate"
	"github.com/compact-host/compact-host/internal/sessionio"
)

// Sessions by ID: the service keeps a conversation in the store, so that
// a client sends only its new messages and reads back the compacted
// context. Every replica that shares the store serves every session.
//
// A session is kept as a host session log trimmed to what its context
// needs: after a compaction, the pinned messages, the summary message
// (folded), the compaction entry and the kept messages; the folded
// history is dropped, so a session stays near its budget however long
// the conversation. Replaying the trimmed log gives the same context and
// the previous summary, which the next compaction merges rather than
// summarizes again.
//
// A write takes the session's lock in the store (so a crossing of the
// threshold is compacted once, even with appends arriving at two
// replicas), then writes at the revision it read (so that a writer whose
// lease ran out cannot overwrite another's work: it reads again and
// redoes its change).

const (
	sessionsPath  = "/v1/sessions/"
	messagesPath  = "/messages"
	maxSessionID  = 128
	sessionPrefix = "session:"
	// maxWriteAttempts bounds the rereads after a lost revision race.
	maxWriteAttempts = 5
	// sessionLease bounds how long a crashed server keeps a session
	// locked. A compaction that outlasts it stays correct (its write
	// fails at the revision it read, and it redoes the append); it may
	// only be paid twice.
	sessionLease = time.Minute
)

// Session route patterns, as the reference names them.
const (
	sessionPattern  = "/v1/sessions/{id}"
	messagesPattern = "/v1/sessions/{id}/messages"
)

// sessionRoute finds the session endpoint of r and puts the session ID
// in r's path values; ok is false for a path that is not one.
func (s *Server) sessionRoute(r *http.Request) (rt route, allow string, ok bool) {
	rest, found := strings.CutPrefix(r.URL.Path, sessionsPath)
	if !found {
		return route{}, "", false
	}
	pattern := sessionPattern
	if id, isMessages := strings.CutSuffix(rest, messagesPath); isMessages {
		pattern, rest = messagesPattern, id
	} else if id, isOriginals := strings.CutSuffix(rest, originalsPath); isOriginals {
		pattern, rest = originalsPattern, id
	}
	r.SetPathValue("id", rest)
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if rt, ok := s.sessionRoutes[method+" "+pattern]; ok {
		return rt, "", true
	}
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete} {
		if _, ok := s.sessionRoutes[m+" "+pattern]; ok {
			methods = append(methods, m)
		}
	}
	return route{}, strings.Join(methods, ", "), true
}

// sessionID is the request's session ID, checked: 1 to 128 letters,
// digits and - _ . :, starting with a letter or digit, so that an ID is
// never a path (../x) nor needs escaping in a URL.
func sessionID(r *http.Request) (string, *apiError) {
	id := r.PathValue("id")
	bad := func(why string) *apiError {
		return badRequest("session ID %s: %s; an ID is 1 to %d letters, digits, '-', '_', '.' or ':', starting with a letter or digit", snippet([]byte(id)), why, maxSessionID)
	}
	switch {
	case id == "":
		return "", bad("empty")
	case len(id) > maxSessionID:
		return "", bad(fmt.Sprintf("%d bytes", len(id)))
	case !isAlnum(id[0]):
		return "", bad("does not start with a letter or digit")
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' && c != ':' {
			return "", bad(fmt.Sprintf("character %q", c))
		}
	}
	return id, nil
}

// sessionRefOf is the request's session: its ID, checked, in the scope
// of the request's tenant.
func sessionRefOf(r *http.Request) (sessionRef, *apiError) {
	id, aerr := sessionID(r)
	if aerr != nil {
		return sessionRef{}, aerr
	}
	return refOf(r, id), nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// sessionSettings is what a session keeps besides its log: the options
// of the PUT that made it.
type sessionSettings struct {
	Options CompactOptions `json:"options"`
	// Cache is the session's prompt-cache state and cost report.
	Cache *cachestate.Conversation `json:"cache,omitempty"`
}

// storeError maps a store failure of session ref to an answer.
func storeError(ctx context.Context, ref sessionRef, err error) *apiError {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, CodeSessionNotFound, "no session %q: create it with PUT %s%s", ref.id, sessionsPath, ref.id)
	case errors.Is(err, store.ErrConflict):
		return errorf(http.StatusConflict, CodeRevisionConflict, "%s; read the session again (GET %s%s) and retry", ref.unscoped(err.Error()), sessionsPath, ref.id)
	case errors.Is(err, store.ErrSessionTooLarge):
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "%s", ref.unscoped(err.Error()))
	case ctx.Err() != nil:
		return workError(ctx, "the session's store", err)
	}
	// A store's errors name its files or its address: the log has them.
	aerr := errorf(http.StatusServiceUnavailable, CodeStoreUnavailable, "the session store did not answer; retry later")
	aerr.cause = err
	return aerr
}

// lockSession takes the session's lock, waiting for another writer's
// within the request's deadline.
func (s *Server) lockSession(ctx context.Context, ref sessionRef) (store.Lock, *apiError) {
	wait := 2 * time.Millisecond
	for {
		l, err := s.store.Lock(ctx, sessionPrefix+ref.key, sessionLease)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, store.ErrLocked) {
			return nil, storeError(ctx, ref, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errorf(http.StatusServiceUnavailable, CodeBusy, "session %q stayed locked by another writer until the request timed out; retry", ref.id)
		case <-t.C:
		}
		wait = min(wait*2, 100*time.Millisecond)
	}
}

func (s *Server) unlock(ctx context.Context, ref sessionRef, l store.Lock) {
	if err := l.Release(context.WithoutCancel(ctx)); err != nil {
		s.log.Warn("session lock", "session", ref.id, "tenant", ref.tenant, "err", err)
	}
}

// loaded is a stored session read into an engine.
type loaded struct {
	stored   *store.Session
	settings sessionSettings
	engine   *host.Engine
	events   *events
	session  *host.Session
}

// load reads the stored session ref into a new engine built with its
// options.
func (s *Server) load(ctx context.Context, ref sessionRef) (*loaded, *apiError) {
	st, err := s.sessions.GetSession(ctx, ref.key)
	if err != nil {
		return nil, storeError(ctx, ref, err)
	}
	ld := &loaded{stored: st}
	if len(st.Settings) > 0 {
		if err := json.Unmarshal(st.Settings, &ld.settings); err != nil {
			return nil, errorf(http.StatusInternalServerError, CodeInternal, "session %q: its stored options do not read: %v", ref.id, err)
		}
	}
	var aerr *apiError
	if ld.engine, ld.events, aerr = s.requestEngine(ctx, ld.settings.Options.EngineOptions); aerr != nil {
		return nil, aerr
	}
	ld.session, err = ld.engine.ReadSessionContext(ctx, bytes.NewReader(st.Messages), "session "+ref.id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, workError(ctx, "reading the session", err)
		}
		return nil, errorf(http.StatusInternalServerError, CodeInternal, "session %q: its stored log does not replay: %v", ref.id, err)
	}
	return ld, nil
}

// threshold is the share of the budget past which a session is
// compacted: its options' threshold, else the engine's policy's, which
// for the cache-aware policy depends on whether the session's prompt
// cache is cold (its last update older than the cache's lifetime).
func threshold(e *host.Engine, o CompactOptions, cold bool) float64 {
	if o.Threshold > 0 {
		return o.Threshold
	}
	pol := e.Policy()
	if cold && pol.ColdAt > 0 {
		return min(pol.ColdAt, pol.CompactAt)
	}
	return pol.CompactAt
}

// cold says whether a session last updated at updated has outlived the
// engine's prompt-cache lifetime.
func (s *Server) cold(e *host.Engine, updated time.Time) bool {
	return !updated.IsZero() && s.opts.Now().Sub(updated) > e.Budget().CacheTTL
}

// gate compacts sess when it passes the threshold, the way
// /v1/compact does (strategy, fallbacks, options), and reports it.
// compacted is true when a compaction (not only a prune) was made.
func (s *Server) gate(ctx context.Context, e *host.Engine, ev *events, sess *host.Session, o CompactOptions, cold bool, growth cost.Growth, began time.Time) (rep *CompactReport, compacted bool, aerr *apiError) {
	at := threshold(e, o, cold)
	res, err := sessionio.Compact(ctx, e, sess, sessionio.Options{Focus: o.Focus, RecallHint: o.RecallHint, Threshold: at, Growth: growth})
	if err != nil {
		return nil, false, workError(ctx, "compacting", err)
	}
	if res.Action == sessionio.ActionNone {
		return &CompactReport{Action: res.Action}, false, nil
	}
	b := e.Budget()
	rep = &CompactReport{
		Action: res.Action, Format: formats.Canonical, Messages: sess.Len(), Model: s.model(o.EngineOptions),
		ContextWindow: b.ContextWindow, Budget: b.Input, Tokenizer: e.Tokenizer(), Threshold: at,
		TokensBefore: res.TokensBefore, TokensAfter: res.TokensAfter, Fits: res.Fits,
		RequestedStrategy: firstOf(o.Strategy, s.opts.Config.Strategy, host.DefaultStrategy),
		Kept:              len(sess.Context()),
	}
	if c := res.Compaction; c != nil {
		rep.Strategy, rep.Offline, rep.Folded = c.Strategy, c.Offline, c.MessagesFolded
	}
	rep.Fallbacks, rep.ModelStats = ev.result()
	rep.DurationMS = float64(time.Since(began).Microseconds()) / 1000
	return rep, res.Compaction != nil, nil
}

// putSession serves PUT /v1/sessions/{id}: create or replace a session,
// compacted at once if it is over its threshold.
func (s *Server) putSession(w http.ResponseWriter, r *http.Request, body []byte) *apiError {
	began := time.Now()
	ref, aerr := sessionRefOf(r)
	if aerr != nil {
		return aerr
	}
	var req SessionRequest
	if aerr := decode(body, &req); aerr != nil {
		return aerr
	}
	if aerr := checkSessionOptions(req.Options, req.IfRevision); aerr != nil {
		return aerr
	}
	ctx := r.Context()
	if aerr := checkFormats(req.Format, ""); aerr != nil {
		return aerr
	}
	e, ev, aerr := s.requestEngine(ctx, req.Options.EngineOptions)
	if aerr != nil {
		return aerr
	}
	in, aerr := readSession(e, req.Session, req.Format)
	if aerr != nil {
		return aerr
	}
	sess, err := withPendingCalls(e, in)
	if err != nil {
		return errorf(http.StatusBadRequest, CodeBadSession, "session: %v", err)
	}
	defer sess.Close()

	l, aerr := s.lockSession(ctx, ref)
	if aerr != nil {
		return aerr
	}
	defer s.unlock(ctx, ref, l)
	// A PUT starts the session's cache state anew: the calls its messages
	// came from were made at times it does not know.
	state := newSessionCache(e)
	rep, compacted, aerr := s.gate(ctx, e, ev, sess, req.Options, false, state.Growth, began)
	if aerr != nil {
		return aerr
	}
	if compacted {
		model := s.model(req.Options.EngineOptions)
		p, _ := prices(model)
		state.Compacted(s.opts.Now(), e.Budget().CacheTTL, p, rep.TokensBefore, rep.TokensAfter, rep.CostUSD)
	}
	settings, err := json.Marshal(sessionSettings{Options: req.Options, Cache: state})
	if err != nil {
		return errorf(http.StatusInternalServerError, CodeInternal, "encode the options: %v", err)
	}
	ifRev := store.AnyRevision
	if req.IfRevision != nil {
		ifRev = *req.IfRevision
	}
	st := &store.Session{ID: ref.key, Settings: settings}
	c, summary := activeSummary(sess)
	if c != nil {
		st.Compactions = 1
		c.ID = "c1"
		if st.LatestRecord, aerr = s.putRecord(ctx, ref, c, summary, rep); aerr != nil {
			return aerr
		}
	}
	if st.Messages, err = trimmedLog(sess, c); err != nil {
		return errorf(http.StatusInternalServerError, CodeInternal, "write the session log: %v", err)
	}
	if aerr := s.reserve(ctx, ref, int64(len(st.Messages)+len(st.Settings))); aerr != nil {
		return aerr
	}
	// A PUT replaces: the revision it read is what it replaces, unless
	// the client named one.
	var created bool
	for attempt := 0; ; attempt++ {
		rev := ifRev
		if req.IfRevision == nil {
			cur, err := s.sessions.GetSession(ctx, ref.key)
			switch {
			case errors.Is(err, store.ErrNotFound):
				rev = 0
			case err != nil:
				return storeError(ctx, ref, err)
			default:
				rev = cur.Revision
			}
		}
		st.Revision, err = s.sessions.PutSession(ctx, st, rev)
		if errors.Is(err, store.ErrConflict) && req.IfRevision == nil && attempt < maxWriteAttempts {
			continue
		}
		if err != nil {
			return storeError(ctx, ref, err)
		}
		created = rev == 0
		break
	}
	s.keepOriginals(ctx, ref, sess, c, summary, true)
	up := s.update(ref.id, st, sess, rep)
	up.Created = created
	up.Warnings = in.Warnings
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, up)
	return nil
}

func checkSessionOptions(o CompactOptions, ifRevision *int64) *apiError {
	switch {
	case o.DryRun:
		return badRequest("options.dry_run: a session is stored, not planned; use POST /v1/compact for a plan")
	case o.Threshold < 0 || o.Threshold > 1:
		return badRequest("options.threshold %g: want a share between 0 and 1", o.Threshold)
	case len(o.Focus) > maxFocusBytes:
		return badRequest("options.focus is %d bytes; at most %d", len(o.Focus), maxFocusBytes)
	case ifRevision != nil && *ifRevision < 0:
		return badRequest("if_revision %d: want a revision, or 0 to only create", *ifRevision)
	}
	return nil
}

// appendMessages serves POST /v1/sessions/{id}/messages: the new
// messages of a session, compacted with the rest when the session passes
// its threshold. An unknown ID is a 404: sessions are made by PUT, so a
// mistyped ID never starts a new conversation.
func (s *Server) appendMessages(w http.ResponseWriter, r *http.Request, body []byte) *apiError {
	began := time.Now()
	ref, aerr := sessionRefOf(r)
	if aerr != nil {
		return aerr
	}
	var req AppendRequest
	if aerr := decode(body, &req); aerr != nil {
		return aerr
	}
	switch {
	case req.Format != "" && req.Format != formats.Canonical && req.Format != formats.Anthropic && req.Format != formats.OpenAI:
		return errorf(http.StatusBadRequest, CodeUnknownFormat, "format %q: messages are canonical, anthropic or openai", req.Format)
	case req.IfRevision != nil && *req.IfRevision < 1:
		return badRequest("if_revision %d: want the revision the session is at (1 or more)", *req.IfRevision)
	}
	raw := bytes.TrimSpace(req.Messages)
	var elems []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &elems) != nil {
		return badRequest("messages is required: a JSON array of messages")
	}
	if len(elems) == 0 {
		return badRequest("messages: the array holds no messages")
	}
	ctx := r.Context()
	l, aerr := s.lockSession(ctx, ref)
	if aerr != nil {
		return aerr
	}
	defer s.unlock(ctx, ref, l)

	for attempt := 0; ; attempt++ {
		ld, aerr := s.load(ctx, ref)
		if aerr != nil {
			return aerr
		}
		cur := ld.stored
		if req.IfRevision != nil && *req.IfRevision != cur.Revision {
			return storeError(ctx, ref, fmt.Errorf("session %q is at revision %d, not %d: %w", ref.id, cur.Revision, *req.IfRevision, store.ErrConflict))
		}
		sess := ld.session
		msgs, warnings, aerr := parseMessages(raw, req.Format, sess.Context())
		if aerr != nil {
			return aerr
		}
		before := sess.Len()
		if err := sess.Append(msgs...); err != nil {
			return errorf(http.StatusBadRequest, CodeBadSession, "messages: %v", err)
		}
		if err := host.Validate(sess.Context(), true); err != nil {
			return errorf(http.StatusBadRequest, CodeInvalidSession, "the session with these messages breaks the providers' rules: %v", err)
		}
		now := s.opts.Now()
		model := s.model(ld.settings.Options.EngineOptions)
		state := ld.settings.Cache
		if state == nil {
			state = newSessionCache(ld.engine)
		}
		reports, misses := observeUsage(state, ld.engine, model, msgs, now)
		// The cache is cold when the last reported call is older than the
		// TTL; without a report, the last update stands for it.
		cold := state.Cold(now)
		if state.LastRequest.IsZero() {
			cold = s.cold(ld.engine, cur.UpdatedAt)
		}
		rep, compacted, aerr := s.gate(ctx, ld.engine, ld.events, sess, ld.settings.Options, cold, state.Growth, began)
		if aerr != nil {
			return aerr
		}
		if compacted {
			p, _ := prices(model)
			state.Compacted(now, ld.engine.Budget().CacheTTL, p, rep.TokensBefore, rep.TokensAfter, rep.CostUSD)
		}
		st := &store.Session{ID: ref.key, Settings: cur.Settings, LatestRecord: cur.LatestRecord, Compactions: cur.Compactions}
		var err error
		if reports > 0 || compacted {
			ld.settings.Cache = state
			if st.Settings, err = json.Marshal(ld.settings); err != nil {
				return errorf(http.StatusInternalServerError, CodeInternal, "encode the session's settings: %v", err)
			}
		}
		// keep keeps what the compaction folded, once the session is written.
		var keep func()
		if rep.Action == sessionio.ActionNone && reports == 0 {
			// Only the new lines travel to the store.
			var lines []byte
			if lines, err = entryLines(sess.Messages()[before:]); err != nil {
				return errorf(http.StatusInternalServerError, CodeInternal, "encode the messages: %v", err)
			}
			if aerr := s.reserve(ctx, ref, int64(len(cur.Messages)+len(cur.Settings)+len(lines))); aerr != nil {
				return aerr
			}
			st.Revision, err = s.sessions.AppendSession(ctx, ref.key, lines, cur.Revision)
		} else if rep.Action == sessionio.ActionNone {
			// The usage reports changed the settings, which an append
			// does not write: the session is written whole.
			var lines []byte
			if lines, err = entryLines(sess.Messages()[before:]); err != nil {
				return errorf(http.StatusInternalServerError, CodeInternal, "encode the messages: %v", err)
			}
			st.Messages = append(cur.Messages[:len(cur.Messages):len(cur.Messages)], lines...)
			if aerr := s.reserve(ctx, ref, int64(len(st.Messages)+len(st.Settings))); aerr != nil {
				return aerr
			}
			st.Revision, err = s.sessions.PutSession(ctx, st, cur.Revision)
		} else {
			c, summary := activeSummary(sess)
			if c != nil && compacted {
				st.Compactions++
				c.ID = "c" + strconv.Itoa(st.Compactions)
				if st.LatestRecord, aerr = s.putRecord(ctx, ref, c, summary, rep); aerr != nil {
					return aerr
				}
			}
			if st.Messages, err = trimmedLog(sess, c); err != nil {
				return errorf(http.StatusInternalServerError, CodeInternal, "write the session log: %v", err)
			}
			if aerr := s.reserve(ctx, ref, int64(len(st.Messages)+len(st.Settings))); aerr != nil {
				return aerr
			}
			if c != nil && compacted {
				keep = func() { s.keepOriginals(ctx, ref, sess, c, summary, false) }
			}
			st.Revision, err = s.sessions.PutSession(ctx, st, cur.Revision)
		}
		if errors.Is(err, store.ErrConflict) && req.IfRevision == nil && attempt < maxWriteAttempts {
			// Another writer came first (this one's lease ran out):
			// redo the append on what it wrote.
			sess.Close()
			continue
		}
		if err != nil {
			return storeError(ctx, ref, err)
		}
		s.countMisses(misses)
		if keep != nil {
			keep()
		}
		up := s.update(ref.id, st, sess, rep)
		up.Appended, up.Warnings = len(msgs), warnings
		sess.Close()
		writeJSON(w, http.StatusOK, up)
		return nil
	}
}

// update is the answer to a write that left st and sess.
func (s *Server) update(id string, st *store.Session, sess *host.Session, rep *CompactReport) SessionUpdate {
	up := SessionUpdate{ID: id, Revision: st.Revision, Action: rep.Action, Tokens: sess.ContextTokens(),
		Compactions: st.Compactions, UpdatedAt: time.Now().UTC()}
	if rep.Action != sessionio.ActionNone {
		up.Report = rep
	}
	return up
}

// putRecord keeps the compaction as a record of the store, under the
// session's conversation, so that the record of a session's latest
// compaction is where the proxy's are.
func (s *Server) putRecord(ctx context.Context, ref sessionRef, c *host.Compaction, summary abi.Message, rep *CompactReport) (string, *apiError) {
	summary.ID = "summary-" + c.ID
	replacement, err := json.Marshal([]abi.Message{summary})
	if err != nil {
		return "", errorf(http.StatusInternalServerError, CodeInternal, "encode the summary: %v", err)
	}
	rec := &store.Record{
		Key: sessionPrefix + ref.key + ":" + c.ID + ":" + strconv.FormatInt(c.Time.UnixNano(), 36), Conversation: sessionPrefix + ref.key,
		FoldedCount: c.MessagesFolded, Replacement: replacement, Summary: c.Summary, Strategy: c.Strategy, Offline: c.Offline,
		TokensBefore: c.TokensBefore, TokensAfter: c.TokensAfter, CostUSD: rep.CostUSD, CreatedAt: c.Time,
	}
	if err := s.store.Put(ctx, rec); err != nil {
		return "", storeError(ctx, ref, err)
	}
	return rec.Key, nil
}

// getSession serves GET /v1/sessions/{id}.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request, _ []byte) *apiError {
	ref, aerr := sessionRefOf(r)
	if aerr != nil {
		return aerr
	}
	format := r.URL.Query().Get("output_format")
	if format == "" {
		format = formats.Canonical
	}
	if aerr := checkFormats("", format); aerr != nil {
		return aerr
	}
	ctx := r.Context()
	ld, aerr := s.load(ctx, ref)
	if aerr != nil {
		return aerr
	}
	defer ld.session.Close()
	msgs := ld.session.Context()
	view := SessionView{ID: ref.id, Revision: ld.stored.Revision, OutputFormat: format, Tokens: ld.session.ContextTokens(),
		Compactions: ld.stored.Compactions, UpdatedAt: ld.stored.UpdatedAt}
	if c := activeCompaction(ld.session); c != nil {
		view.Summary = c.Summary
	}
	view.Cache = cacheView(ld.settings.Cache, ld.engine, s.model(ld.settings.Options.EngineOptions), s.opts.Now())
	var err error
	if view.Messages, view.System, err = renderMessages(msgs, format); err != nil {
		return errorf(http.StatusInternalServerError, CodeInternal, "write the session as %s: %v", format, err)
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// deleteSession serves DELETE /v1/sessions/{id}.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, _ []byte) *apiError {
	ref, aerr := sessionRefOf(r)
	if aerr != nil {
		return aerr
	}
	ctx := r.Context()
	if err := s.sessions.DeleteSession(ctx, ref.key); err != nil {
		return storeError(ctx, ref, err)
	}
	s.dropOriginals(ctx, ref.key)
	s.release(ctx, ref)
	writeJSON(w, http.StatusOK, SessionDeleted{ID: ref.id, Deleted: true})
	return nil
}

// renderMessages writes msgs in format as a JSON array a caller sends as
// is, and Anthropic's system prompt beside it.
func renderMessages(msgs []abi.Message, format string) (messages, system json.RawMessage, err error) {
	if format == formats.Canonical {
		if msgs == nil {
			msgs = []abi.Message{}
		}
		b, err := json.Marshal(msgs)
		return b, nil, err
	}
	var b bytes.Buffer
	if err := formats.Write(&b, format, msgs); err != nil {
		return nil, nil, err
	}
	var doc struct {
		Messages json.RawMessage `json:"messages"`
		System   json.RawMessage `json:"system"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		return nil, nil, err
	}
	if len(doc.Messages) == 0 || string(doc.Messages) == "null" {
		doc.Messages = json.RawMessage("[]")
	}
	return doc.Messages, doc.System, nil
}

// activeCompaction is the compaction whose summary the context shows, or
// nil.
func activeCompaction(sess *host.Session) *host.Compaction {
	c, _ := activeSummary(sess)
	return c
}

// activeSummary is activeCompaction and its summary message.
func activeSummary(sess *host.Session) (*host.Compaction, abi.Message) {
	ctx := sess.Context()
	cs := sess.Compactions()
	for i := len(ctx) - 1; i >= 0; i-- {
		cid, ok := strings.CutPrefix(ctx[i].ID, "summary-")
		if !ctx[i].Summary || !ok {
			continue
		}
		for j := len(cs) - 1; j >= 0; j-- {
			if cs[j].ID == cid {
				c := cs[j]
				return &c, ctx[i]
			}
		}
	}
	return nil, abi.Message{}
}

// trimmedLog is a session log that replays to sess's context with c (the
// active compaction, or nil) as its only compaction: the messages that
// stand before the kept ones (pinned ones and the summary message)
// written as messages, c folding through the last of them, then the kept
// messages as the context shows them (prunes applied). The folded
// history is left out.
func trimmedLog(sess *host.Session, c *host.Compaction) ([]byte, error) {
	ctx := sess.Context()
	if c == nil {
		return entryLines(ctx)
	}
	all := sess.Messages()
	through := -1
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].ID == c.FoldedThrough {
			through = i
			break
		}
	}
	prefix := len(ctx) - (len(all) - through - 1)
	if through < 0 || prefix < 1 || prefix > len(ctx) {
		return nil, fmt.Errorf("compaction %s folds through %q, which the session does not place", c.ID, c.FoldedThrough)
	}
	var entries []host.Entry
	for i := range ctx[:prefix] {
		m := ctx[i]
		if m.Summary && strings.HasPrefix(m.ID, "summary-") {
			// Renamed with c, so that its ID and the one the replayed
			// view gives agree.
			m.ID = "summary-" + c.ID
		}
		entries = append(entries, host.Entry{Type: host.EntryMessage, Message: &m})
	}
	cc := *c
	cc.FoldedThrough = entries[len(entries)-1].Message.ID
	entries = append(entries, host.Entry{Type: host.EntryCompaction, Compaction: &cc})
	for i := prefix; i < len(ctx); i++ {
		m := ctx[i]
		entries = append(entries, host.Entry{Type: host.EntryMessage, Message: &m})
	}
	return logOf(entries)
}

// entryLines are msgs as message lines of a session log.
func entryLines(msgs []abi.Message) ([]byte, error) {
	entries := make([]host.Entry, len(msgs))
	for i := range msgs {
		entries[i] = host.Entry{Type: host.EntryMessage, Message: &msgs[i]}
	}
	return logOf(entries)
}

func logOf(entries []host.Entry) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i := range entries {
		if err := enc.Encode(&entries[i]); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// parseMessages reads an append's messages in format. Provider formats
// are read as a continuation of context: the calls it leaves open are
// put before the new messages, so that their results are matched and not
// repaired into text, and results the reader makes up for calls the new
// messages leave open are dropped (the agent is running them).
func parseMessages(raw json.RawMessage, format string, context []abi.Message) ([]abi.Message, []string, *apiError) {
	if format == "" || format == formats.Canonical {
		var msgs []abi.Message
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&msgs); err != nil {
			return nil, nil, errorf(http.StatusBadRequest, CodeBadSession, "messages: not an array of canonical messages ({\"role\",\"content\":[blocks]}): %v", err)
		}
		if len(msgs) == 0 {
			return nil, nil, badRequest("messages: the array holds no messages")
		}
		return msgs, nil, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, nil, errorf(http.StatusBadRequest, CodeBadSession, "messages: %v", err)
	}
	if len(elems) == 0 {
		return nil, nil, badRequest("messages: the array holds no messages")
	}
	open := openCalls(context)
	if len(open) > 0 {
		elems = append([]json.RawMessage{openCallsMessage(format, open)}, elems...)
	}
	doc, err := json.Marshal(map[string]any{"messages": elems})
	if err != nil {
		return nil, nil, badRequest("messages: %v", err)
	}
	read, err := formats.Read(bytes.NewReader(doc), format)
	if err != nil {
		return nil, nil, errorf(http.StatusBadRequest, CodeBadSession, "messages as %s: %v", format, err)
	}
	msgs := read.Messages
	if len(open) > 0 {
		if len(msgs) == 0 || msgs[0].Role != abi.RoleAssistant {
			return nil, nil, errorf(http.StatusInternalServerError, CodeInternal, "the open calls did not read back as the first message")
		}
		msgs = msgs[1:]
	}
	msgs = withoutMadeUpTail(msgs, read.Repaired)
	var warnings []string
	for kind, n := range read.Repaired {
		if kind != formats.RepairMissingResult && kind != formats.RepairDuplicateMessageID && n > 0 {
			warnings = append(warnings, fmt.Sprintf("%d messages repaired (%s)", n, kind))
		}
	}
	for i := range msgs {
		// The session names them; the reader's names could clash
		// with those of earlier appends.
		msgs[i].ID = ""
	}
	if len(msgs) == 0 {
		return nil, nil, badRequest("messages: the array holds no conversation content")
	}
	return msgs, warnings, nil
}

// openCalls are the tool calls of context that wait for a result.
func openCalls(context []abi.Message) []abi.Block {
	answered := map[string]bool{}
	for _, m := range context {
		for _, b := range m.Content {
			if b.Type == abi.BlockToolResult {
				answered[b.ToolUseID] = true
			}
		}
	}
	var open []abi.Block
	for _, m := range context {
		for _, b := range m.Content {
			if b.Type == abi.BlockToolUse && !answered[b.ID] {
				open = append(open, b)
			}
		}
	}
	return open
}

// openCallsMessage is an assistant message in format that makes calls.
func openCallsMessage(format string, calls []abi.Block) json.RawMessage {
	var b bytes.Buffer
	m := abi.Message{Role: abi.RoleAssistant, Content: calls}
	_ = formats.Write(&b, format, []abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "."}}}, m})
	var doc struct {
		Messages []json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(b.Bytes(), &doc)
	return doc.Messages[len(doc.Messages)-1]
}

// withoutMadeUpTail is msgs without the results the reader made up for
// the calls the last assistant message leaves open. The reference lets
// those results come in a later append: the calls must wait for them, as
// the agent is running them, not be closed as interrupted.
func withoutMadeUpTail(msgs []abi.Message, repaired map[string]int) []abi.Message {
	n := len(msgs)
	if n == 0 || repaired[formats.RepairMissingResult] == 0 || !madeUpResults(msgs[n-1]) {
		return msgs
	}
	return msgs[:n-1]
}

// withPendingCalls is the session a PUT stores: in's session, with the
// calls it ends on left waiting for their results (withoutMadeUpTail),
// so that a PUT stores open calls as an append does. in's session is
// closed when another is returned.
func withPendingCalls(e *host.Engine, in *input) (*host.Session, error) {
	if in.Log {
		// A session log is stored as the client wrote it: its reader
		// makes nothing up.
		return in.Session, nil
	}
	msgs := in.Session.Context()
	kept := withoutMadeUpTail(msgs, in.Repaired)
	if len(kept) == len(msgs) {
		return in.Session, nil
	}
	sess := e.NewSession()
	if err := sess.Append(kept...); err != nil {
		sess.Close()
		return nil, err
	}
	in.Session.Close()
	return sess, nil
}

// madeUpResults reports whether m holds only results the reader made up
// for calls without one.
func madeUpResults(m abi.Message) bool {
	if m.Role != abi.RoleUser || len(m.Content) == 0 {
		return false
	}
	for _, b := range m.Content {
		if b.Type != abi.BlockToolResult || !b.IsError || b.Text != formats.MissingResultText {
			return false
		}
	}
	return true
}
