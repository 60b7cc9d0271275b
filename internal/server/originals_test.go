package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/store"
)

func originalsOf(t *testing.T, c tenantClient, id string) ([]abi.Message, response) {
	t.Helper()
	r := c.call(http.MethodGet, "/v1/sessions/"+id+"/originals", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var o SessionOriginals
	require.NoError(t, json.Unmarshal(r.Body, &o))
	assert.Equal(t, id, o.ID)
	var msgs []abi.Message
	require.NoError(t, json.Unmarshal(o.Messages, &msgs))
	return msgs, r
}

func textOf(msgs []abi.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, blk := range m.Content {
			b.WriteString(blk.Text + "\n")
		}
	}
	return b.String()
}

// The originals of a session: what its compaction folded, word for word,
// and its summary, then the context, each once; 304 while unchanged;
// the token's own only; started anew by a PUT, removed by a DELETE and
// by the tenant's quota with the session.
func TestSessionOriginals(t *testing.T) {
	st := store.NewMemory()
	srv, ts := start(t, func(o *Options) {
		o.Store, o.Quota = st, Quota{MaxSessions: 2}
		o.Tokens = []Token{{Name: "a", Secret: tokenA}, {Name: "b", Secret: tokenB}}
	})
	a, b := tenantClient{t, ts, tokenA}, tenantClient{t, ts, tokenB}
	putCompacted := func(id string, msgs []abi.Message) int {
		return a.call(http.MethodPut, "/v1/sessions/"+id, map[string]any{"session": encode(t, "canonical", msgs), "options": sessionOptions}).Status
	}
	scopedKeyOf := func(id string) string { return scopedKey(srv.keyer.Of(tokenA), id) }
	conv := codingSession(51, 8, 600)
	require.Equal(t, http.StatusCreated, putCompacted("work", conv))
	view := getSessionAs(t, a, "work")
	require.NotEmpty(t, view.Summary, "the PUT compacted the session")

	msgs, r := originalsOf(t, a, "work")
	all := textOf(msgs)
	for _, m := range conv {
		for _, blk := range m.Content {
			assert.Contains(t, all, blk.Text, "every original is there")
		}
	}
	summaries, ids := 0, map[string]bool{}
	for _, m := range msgs {
		if m.Summary {
			summaries++
		}
		assert.False(t, ids[m.ID], "message %s twice", m.ID)
		ids[m.ID] = true
	}
	assert.Equal(t, 1, summaries)
	etag := r.Header.Get("ETag")
	require.NotEmpty(t, etag)
	r = a.call(http.MethodGet, "/v1/sessions/work/originals", nil)
	assert.Equal(t, etag, r.Header.Get("ETag"))
	r = call(t, a.ts, http.MethodGet, "/v1/sessions/work/originals", nil, "Authorization", "Bearer "+tokenA, "If-None-Match", etag)
	assert.Equal(t, http.StatusNotModified, r.Status)
	assert.Empty(t, r.Body)

	// Another token, an ID never made, a mangled ID.
	b.call(http.MethodGet, "/v1/sessions/work/originals", nil).wantError(t, http.StatusNotFound, CodeSessionNotFound)
	a.call(http.MethodGet, "/v1/sessions/never/originals", nil).wantError(t, http.StatusNotFound, CodeSessionNotFound)
	a.call(http.MethodGet, "/v1/sessions/%2e%2e/originals", nil).wantError(t, http.StatusBadRequest, CodeBadRequest)
	a.call(http.MethodPost, "/v1/sessions/work/originals", map[string]any{}).wantError(t, http.StatusMethodNotAllowed, CodeMethodNotAllowed)
	_, err := st.GetSession(t.Context(), originalsKey(scopedKeyOf("work")))
	require.NoError(t, err, "the originals are in the store")

	// A PUT replaces the conversation and its originals.
	require.Equal(t, http.StatusOK, a.put("work", conv[:3]).Status)
	msgs, _ = originalsOf(t, a, "work")
	assert.Len(t, msgs, 3, "the new context only")
	assert.NotContains(t, textOf(msgs), conv[5].Content[0].Text)

	// A DELETE removes them; so does the quota, with the session.
	require.Equal(t, http.StatusOK, putCompacted("work", conv))
	a.call(http.MethodDelete, "/v1/sessions/work", nil).wantStatus(t, http.StatusOK)
	_, err = st.GetSession(t.Context(), originalsKey(scopedKeyOf("work")))
	assert.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, http.StatusCreated, putCompacted("first", conv))
	_, err = st.GetSession(t.Context(), originalsKey(scopedKeyOf("first")))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, a.put("second", conv[:2]).Status)
	require.Equal(t, http.StatusCreated, a.put("third", conv[:2]).Status)
	a.call(http.MethodGet, "/v1/sessions/first", nil).wantError(t, http.StatusNotFound, CodeSessionNotFound)
	_, err = st.GetSession(t.Context(), originalsKey(scopedKeyOf("first")))
	assert.ErrorIs(t, err, store.ErrNotFound, "the quota removed the originals with the session")
}

// The originals count in the tenant's bytes: they push out the tenant's
// sessions written longest ago, and are not kept when the session and
// they would be over the quota alone.
func TestSessionOriginalsCountInTheQuota(t *testing.T) {
	conv := codingSession(52, 8, 600)
	startAt := func(q Quota) (*Server, tenantClient) {
		srv, ts := start(t, func(o *Options) {
			o.Store, o.Quota = store.NewMemory(), q
			o.Tokens = []Token{{Name: "a", Secret: tokenA}}
		})
		return srv, tenantClient{t, ts, tokenA}
	}
	putCompacted := func(a tenantClient, id string) {
		r := a.call(http.MethodPut, "/v1/sessions/"+id, map[string]any{"session": encode(t, "canonical", conv), "options": sessionOptions})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	}
	srv, a := startAt(Quota{})
	putCompacted(a, "work")
	u, _, err := srv.readUsage(t.Context(), srv.keyer.Of(tokenA))
	require.NoError(t, err)
	e := u.Sessions["work"]
	require.Positive(t, e.Bytes)
	require.Greater(t, e.Originals, e.Bytes, "the originals are most of the conversation")
	full, _ := originalsOf(t, a, "work")

	// Room for the session and its originals, but not for an older one too.
	_, a = startAt(Quota{MaxBytes: e.Bytes + e.Originals + 100})
	require.Equal(t, http.StatusCreated, a.put("old", conv[:2]).Status)
	putCompacted(a, "work")
	a.call(http.MethodGet, "/v1/sessions/old", nil).wantError(t, http.StatusNotFound, CodeSessionNotFound)
	msgs, _ := originalsOf(t, a, "work")
	assert.Equal(t, len(full), len(msgs))

	// Room for the session alone: its originals are not kept.
	_, a = startAt(Quota{MaxBytes: e.Bytes + e.Originals/2})
	putCompacted(a, "work")
	msgs, _ = originalsOf(t, a, "work")
	assert.Less(t, len(msgs), len(full)/2, "the context only")
	assert.NotContains(t, textOf(msgs), conv[3].Content[0].Text)
}
