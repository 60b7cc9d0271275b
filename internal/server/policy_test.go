package server

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/store"
)

// A session with the cache-aware policy is compacted past half its budget
// once its last update is older than the cache's lifetime, and not while
// it is warm; the threshold policy waits for its point either way.
func TestSessionPolicyCompactsAnExpiredCache(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   string
	}{{"cache-aware", "compacted"}, {"threshold", "none"}} {
		t.Run(tc.policy, func(t *testing.T) {
			var skew atomic.Int64
			_, ts := start(t, func(o *Options) {
				o.Store = store.NewMemory()
				o.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			})
			conv := codingSession(3, 30, 700)
			opts := map[string]any{"keep_recent_tokens": 1500, "policy": tc.policy, "cold_share": 0.5, "cache_ttl": "5m"}
			r := call(t, ts, http.MethodPut, "/v1/sessions/s1", map[string]any{"session": encode(t, "canonical", conv[:2]), "options": opts})
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
			// Warm appends up to past half of the 18,000 budget, under 75%.
			next := 2
			var up SessionUpdate
			for up.Tokens < 9600 {
				end := next + 1
				for end < len(conv) && conv[end].Role != abi.RoleUser {
					end++
				}
				up = appendTo(t, ts, "s1", "canonical", conv[next:end])
				require.Equal(t, "none", up.Action, "a warm session was compacted at %d tokens", up.Tokens)
				next = end
			}
			require.Less(t, up.Tokens, 13_000, "the session grew past the threshold's point")
			// Ten minutes later the cache has expired.
			skew.Store(int64(10 * time.Minute))
			end := next + 1
			for end < len(conv) && conv[end].Role != abi.RoleUser {
				end++
			}
			up = appendTo(t, ts, "s1", "canonical", conv[next:end])
			assert.Equal(t, tc.want, up.Action, "at %d tokens", up.Tokens)
		})
	}
	_, ts := start(t, nil)
	for _, o := range []map[string]any{{"policy": "cheapest"}, {"cold_share": 2}, {"cache_ttl": "2h"}} {
		r := call(t, ts, http.MethodPut, "/v1/sessions/bad", map[string]any{"session": encode(t, "canonical", codingSession(1, 1, 10)), "options": o})
		r.wantError(t, http.StatusBadRequest, CodeBadRequest)
	}
}
