package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/store"
)

// Two tenants' tokens, each long enough to be told apart from any other
// text of a log or a store.
const (
	tokenA = "tenant-a-token-7f3c9e21b8d4"
	tokenB = "tenant-b-token-0a6d52fe9c17"
)

// tenantClient calls ts with one token.
type tenantClient struct {
	t     *testing.T
	ts    *httptest.Server
	token string
}

func (c tenantClient) call(method, path string, body any) response {
	c.t.Helper()
	return call(c.t, c.ts, method, path, body, "Authorization", "Bearer "+c.token)
}

func (c tenantClient) put(id string, msgs []abi.Message) response {
	c.t.Helper()
	return c.call(http.MethodPut, "/v1/sessions/"+id, map[string]any{"session": encode(c.t, "canonical", msgs)})
}

// startTenants serves the two tenants over st with quota q, logging to
// logs.
func startTenants(t *testing.T, st store.Store, q Quota, logs *syncBuffer) (a, b tenantClient) {
	t.Helper()
	_, ts := start(t, func(o *Options) {
		o.Store, o.Quota = st, q
		o.Tokens = []Token{{Name: "a", Secret: tokenA}, {Name: "b", Secret: tokenB}}
		if logs != nil {
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	})
	return tenantClient{t, ts, tokenA}, tenantClient{t, ts, tokenB}
}

// Tenant B reaches none of A's sessions: reading, appending, deleting and
// replacing one answer as for an ID never made (404, not 403), and B's
// PUT of A's ID makes B's own session beside A's.
func TestTenantsReachOnlyTheirOwnSessions(t *testing.T) {
	a, b := startTenants(t, store.NewMemory(), Quota{}, nil)
	conv := codingSession(41, 2, 200)
	require.Equal(t, http.StatusCreated, a.put("work", conv[:2]).Status)
	aView := getSessionAs(t, a, "work")

	never := b.call(http.MethodGet, "/v1/sessions/never-made", nil).wantError(t, http.StatusNotFound, CodeSessionNotFound)
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/v1/sessions/work", nil},
		{http.MethodPost, "/v1/sessions/work/messages", map[string]any{"messages": messagesIn(t, "canonical", conv[2:4])}},
		{http.MethodDelete, "/v1/sessions/work", nil},
	} {
		got := b.call(tc.method, tc.path, tc.body).wantError(t, http.StatusNotFound, CodeSessionNotFound)
		assert.Equal(t, strings.ReplaceAll(never.Message, "never-made", "work"), got.Message,
			"%s %s: answered as for an ID never made", tc.method, tc.path)
	}
	// B's PUT of the same ID creates B's session; A's is untouched.
	bConv := codingSession(42, 1, 100)
	require.Equal(t, http.StatusCreated, b.put("work", bConv[:2]).Status, "B's PUT creates, it does not replace A's")
	assert.Equal(t, aView, getSessionAs(t, a, "work"), "A's session after B's PUT")
	b.call(http.MethodDelete, "/v1/sessions/work", nil).wantStatus(t, http.StatusOK)
	assert.Equal(t, aView, getSessionAs(t, a, "work"), "A's session after B's DELETE")
}

func getSessionAs(t *testing.T, c tenantClient, id string) SessionView {
	t.Helper()
	var v SessionView
	c.call(http.MethodGet, "/v1/sessions/"+id, nil).decode(t, &v)
	return v
}

// A tenant that creates sessions past its quota loses its own sessions
// written longest ago, never another's: with one token shared by all, or
// the store's own limit, B's sessions used to push A's out.
func TestTenantQuotaEvictsOnlyItsOwnSessions(t *testing.T) {
	// The store keeps up to 8 sessions in all (an eviction of its own
	// past that); the quota keeps each tenant's 2 and their ledgers far
	// below it.
	st, err := store.OpenDisk(t.TempDir(), store.DiskOptions{MaxSessions: 8})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a, b := startTenants(t, st, Quota{MaxSessions: 2}, nil)
	conv := codingSession(43, 1, 100)
	for _, id := range []string{"a1", "a2"} {
		require.Equal(t, http.StatusCreated, a.put(id, conv[:2]).Status)
	}
	for i := range 20 {
		require.Equal(t, http.StatusCreated, b.put(fmt.Sprintf("b%d", i), conv[:2]).Status)
	}
	for _, id := range []string{"a1", "a2"} {
		a.call(http.MethodGet, "/v1/sessions/"+id, nil).wantStatus(t, http.StatusOK)
	}
	for i := range 18 {
		b.call(http.MethodGet, fmt.Sprintf("/v1/sessions/b%d", i), nil).wantError(t, http.StatusNotFound, CodeSessionNotFound)
	}
	for _, id := range []string{"b18", "b19"} {
		b.call(http.MethodGet, "/v1/sessions/"+id, nil).wantStatus(t, http.StatusOK)
	}
	// A deleted session frees its place: A's next session pushes out
	// none of A's.
	a.call(http.MethodDelete, "/v1/sessions/a1", nil).wantStatus(t, http.StatusOK)
	require.Equal(t, http.StatusCreated, a.put("a3", conv[:2]).Status)
	a.call(http.MethodGet, "/v1/sessions/a2", nil).wantStatus(t, http.StatusOK)
}

// The bytes quota: a second large session pushes out the tenant's first;
// one over the quota alone is refused with a message naming the limit.
func TestTenantBytesQuota(t *testing.T) {
	probe := codingSession(44, 3, 400)
	size := len(encode(t, "canonical", probe))
	a, b := startTenants(t, store.NewMemory(), Quota{MaxBytes: int64(size) * 3 / 2}, nil)
	require.Equal(t, http.StatusCreated, b.put("b-small", probe[:2]).Status)
	require.Equal(t, http.StatusCreated, a.put("first", probe).Status)
	require.Equal(t, http.StatusCreated, a.put("second", probe).Status)
	a.call(http.MethodGet, "/v1/sessions/first", nil).wantError(t, http.StatusNotFound, CodeSessionNotFound)
	a.call(http.MethodGet, "/v1/sessions/second", nil).wantStatus(t, http.StatusOK)
	b.call(http.MethodGet, "/v1/sessions/b-small", nil).wantStatus(t, http.StatusOK)

	huge := codingSession(45, 12, 400)
	e := a.put("huge", huge).wantError(t, http.StatusInsufficientStorage, CodeQuotaExceeded)
	assert.Contains(t, e.Message, "--tenant-max-bytes")
	assert.Contains(t, e.Message, fmt.Sprint(size*3/2))
	a.call(http.MethodGet, "/v1/sessions/second", nil).wantStatus(t, http.StatusOK)
}

// No token reaches the store or the log: keys are the tenant's keyed
// hash, and the log names tenants by it and by the token's name.
func TestTokensAreNeverStoredNorLogged(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenDisk(dir, store.DiskOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	var logs syncBuffer
	a, b := startTenants(t, st, Quota{MaxSessions: 1}, &logs)
	conv := codingSession(46, 6, 400)
	require.Equal(t, http.StatusCreated, a.put("s1", conv[:2]).Status)
	require.Equal(t, http.StatusCreated, a.put("s2", conv[:2]).Status) // evicts s1: logged
	b.put("s1", conv[:2])
	for i := 2; i+2 <= len(conv); i += 2 {
		a.call(http.MethodPost, "/v1/sessions/s2/messages", map[string]any{"messages": messagesIn(t, "canonical", conv[i:i+2])})
	}
	// A token sent where the API quotes its input back.
	call(t, a.ts, http.MethodGet, "/v1/nothing", nil, "Authorization", "Bearer "+tokenA+"x")
	a.call(http.MethodPost, "/v1/compact", `{"session": "`+tokenB+`"}`)

	require.NotEmpty(t, logs.String())
	for _, tok := range []string{tokenA, tokenB} {
		assert.NotContains(t, logs.String(), tok, "the log")
		err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			assert.NotContains(t, string(b), tok, "stored in %s", path)
			assert.NotContains(t, path, tok)
			return nil
		})
		require.NoError(t, err)
	}
	assert.Contains(t, logs.String(), "tenant=t-", "the log names tenants by their ID")
}
