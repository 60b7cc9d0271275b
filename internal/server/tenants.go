package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/compact-host/compact-host/internal/tenant"
)

// Tenants: every token the server accepts is a tenant of its own, and
// everything the session endpoints keep (sessions, their compaction
// records, their locks, their quota) lives under that tenant's scope in
// the store. A token reaches only its own sessions: another's ID answers
// 404, as an ID that was never made, so that existence does not leak.
//
// The scope is a keyed hash of the token (package tenant), never the
// token: the store's keys and the log show the tenant ID only.

// Token is a credential the server accepts.
type Token struct {
	// Name says whose token it is in the server's log; it is optional
	// and never a secret.
	Name string
	// Secret is what a client sends as "Authorization: Bearer <Secret>".
	Secret string
}

// caller is the tenant a request acts for, and its token's name.
type caller struct {
	tenant tenant.ID
	name   string
}

type callerKey struct{}

// callerOf is the caller dispatch authorized r as.
func callerOf(r *http.Request) caller { return callerIn(r.Context()) }

// callerIn is the caller of the request whose context ctx is.
func callerIn(ctx context.Context) caller {
	if c, ok := ctx.Value(callerKey{}).(caller); ok {
		return c
	}
	return caller{tenant: tenant.Anonymous}
}

// tokenEntry is an accepted token as the server keeps it: the hash of
// its secret, compared in constant time, and its name.
type tokenEntry struct {
	sum  [sha256.Size]byte
	name string
}

// authorize finds the caller of r: the tenant of its bearer token, or
// Anonymous when the server takes no token. ok is false for a missing or
// unknown token. The token is found by its tenant ID, a keyed hash that
// a client cannot aim at, then compared in constant time.
func (s *Server) authorize(r *http.Request) (caller, bool) {
	if len(s.tokens) == 0 {
		return caller{tenant: tenant.Anonymous}, true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return caller{}, false
	}
	id := s.keyer.Of(token)
	e, found := s.tokens[id]
	got := sha256.Sum256([]byte(token))
	if !found || subtle.ConstantTimeCompare(got[:], e.sum[:]) != 1 {
		return caller{}, false
	}
	return caller{tenant: id, name: e.name}, true
}

// withCaller is r acting for c.
func withCaller(r *http.Request, c caller) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
}

// sessionRef is a session as the client names it (id) and as the store
// keeps it (key, in its tenant's scope).
type sessionRef struct {
	id     string
	key    string
	tenant tenant.ID
}

// refOf scopes the client's session id by the tenant of r. The sessions
// of a server without tokens keep the client's IDs as keys, as before
// tenants, so that they survive an upgrade.
func refOf(r *http.Request, id string) sessionRef {
	t := callerOf(r).tenant
	return sessionRef{id: id, key: scopedKey(t, id), tenant: t}
}

// scopedKey is the store's key of a tenant's session id. Session IDs
// hold no '/', so no tenant's key is another's.
func scopedKey(t tenant.ID, id string) string {
	if t == tenant.Anonymous {
		return id
	}
	return string(t) + "/" + id
}

// unscoped is a store's message with the session's key put back as the
// client's ID: the client never sees its tenant's scope.
func (ref sessionRef) unscoped(msg string) string {
	if ref.key == ref.id {
		return msg
	}
	return strings.ReplaceAll(msg, ref.key, ref.id)
}
