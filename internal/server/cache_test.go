package server

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/storetest"
	"github.com/compact-host/compact-host/internal/cachestate"
)

// cacheRig serves sessions from st at a clock the test moves.
type cacheRig struct {
	skew atomic.Int64
	st   store.Store
}

func (c *cacheRig) start(t *testing.T) *httptest.Server {
	_, ts := start(t, func(o *Options) {
		o.Store = c.st
		o.Now = func() time.Time { return time.Now().Add(time.Duration(c.skew.Load())) }
	})
	return ts
}

// sonnetUSD prices a usage at Sonnet 4.5's list prices with 5-minute
// writes: $3 input, $0.30 cache read, $3.75 cache write, $15 output.
func sonnetUSD(u abi.Usage) float64 {
	return (3*float64(u.InputTokens) + 0.3*float64(u.CacheReadTokens) + 3.75*float64(u.CacheWriteTokens) + 15*float64(u.OutputTokens)) / 1e6
}

// A session whose client reports each call's usage: the GET shows when
// the last call was, what it cached, why calls missed (the first, the one
// after each compaction, one after a ten-minute pause), the bill at the
// catalog's prices, each compaction priced, and the bill without them;
// serve's /metrics counts the misses. All of it is kept with the session
// in the store: a server started anew on the same disk store, or a second
// server on the same Redis, serves the same report and goes on from it.
func TestSessionCacheStateAndCost(t *testing.T) {
	for _, backend := range []string{"disk", "redis"} {
		t.Run(backend, func(t *testing.T) {
			rig := &cacheRig{}
			var reopen func() store.Store
			switch backend {
			case "disk":
				dir := t.TempDir()
				reopen = func() store.Store {
					st, err := store.OpenDisk(dir, store.DiskOptions{})
					require.NoError(t, err)
					return st
				}
			case "redis":
				r := storetest.StartRedis(t)
				reopen = func() store.Store { return openRedis(t, r) }
			}
			rig.st = reopen()
			ts := rig.start(t)
			conv := codingSession(21, 14, 700)
			opts := map[string]any{"model": "claude-sonnet-4-5", "context_window": 20000, "keep_recent_tokens": 1500, "threshold": 0.5, "cache_ttl": "5m"}
			r := call(t, ts, http.MethodPut, "/v1/sessions/billed", map[string]any{"session": encode(t, "canonical", conv[:2]), "options": opts})
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)

			want := map[string]int{}
			var (
				bill, lastCached          float64
				reports, compactions      int
				compacted, paused         bool
				lastRead, lastWrite, prev int
			)
			for i, c := range chunks(conv[2:]) {
				if i == 12 {
					// Ten minutes without a call: the 5-minute entry is gone.
					rig.skew.Add(int64(10 * time.Minute))
					paused = true
				}
				msgs := append([]abi.Message(nil), c...)
				for j := range msgs {
					if msgs[j].Role != abi.RoleAssistant {
						continue
					}
					// A call reads what the previous one cached, unless a
					// compaction rewrote the prompt or the entry expired,
					// and writes what it adds.
					read, write := prev, 400
					switch {
					case reports == 0:
						want[cachestate.ColdStart]++
						read, write = 0, 3000
					case paused:
						want[cachestate.TTLExpired]++
						read, write, paused = 0, prev+400, false
					case compacted:
						want[cachestate.Compaction]++
						read, write, compacted = 0, 2500, false
					}
					u := abi.Usage{InputTokens: 3, CacheReadTokens: read, CacheWriteTokens: write, OutputTokens: 120}
					msgs[j].Usage = &u
					bill += sonnetUSD(u)
					reports++
					prev, lastRead, lastWrite = read+write, read, write
					lastCached = float64(read + write)
				}
				up := appendTo(t, ts, "billed", "canonical", msgs)
				if up.Action == "compacted" {
					compactions++
					compacted = true
				}
			}
			require.GreaterOrEqual(t, compactions, 2, "the session compacted")
			require.Positive(t, want[cachestate.TTLExpired])

			v := getSession(t, ts, "billed", "canonical")
			c := v.Cache
			require.NotNil(t, c)
			assert.Equal(t, reports, c.Requests)
			assert.Equal(t, want, c.Misses)
			assert.Equal(t, "5m", c.TTL)
			require.NotNil(t, c.LastRequest)
			assert.WithinDuration(t, time.Now().Add(10*time.Minute), *c.LastRequest, time.Minute)
			assert.Equal(t, int(lastCached), c.CachedTokens)
			assert.Equal(t, 3+lastRead+lastWrite, c.PromptTokens)
			assert.Equal(t, 1, c.Growth.Expired, "the one pause over the TTL")
			assert.True(t, c.Cost.Priced)
			assert.InDelta(t, bill, c.Cost.Bill.USD, 1e-9)
			assert.Equal(t, reports, c.Cost.Bill.Requests)
			require.Len(t, c.Cost.Compactions, compactions)
			var own float64
			for _, cc := range c.Cost.Compactions {
				assert.Greater(t, cc.TokensBefore, cc.TokensAfter)
				assert.InDelta(t, float64(cc.TokensAfter)*3.75/1e6, cc.RewriteUSD, 1e-12, "the prompt after, written anew")
				assert.InDelta(t, float64(cc.TokensBefore-cc.TokensAfter)*0.3/1e6, cc.SavedPerRequestUSD, 1e-12)
				own += cc.SummaryUSD + cc.RewriteUSD
			}
			assert.InDelta(t, own, c.Cost.CompactionsUSD, 1e-12)
			assert.Greater(t, c.Cost.UncompactedUSD, c.Cost.Bill.USD, "every call after a compaction would have read what it freed")
			assert.InDelta(t, c.Cost.UncompactedUSD-c.Cost.Bill.USD-c.Cost.SummaryUSD, c.Cost.SavedUSD, 1e-12)

			// serve's metrics count the same misses, under the proxy's name.
			mr := call(t, ts, http.MethodGet, "/metrics", nil)
			require.Equal(t, http.StatusOK, mr.Status)
			for _, reason := range cachestate.Reasons {
				assert.Contains(t, string(mr.Body), cachestate.MetricName+`{reason="`+reason+`"} `+strconv.Itoa(want[reason]), reason)
			}

			// A server started anew on the same store serves the same
			// report, and classifies from the stored last call.
			require.NoError(t, rig.st.Close())
			rig.st = reopen()
			again := rig.start(t)
			after := getSession(t, again, "billed", "canonical")
			assert.Equal(t, c, after.Cache)
			rig.skew.Add(int64(6 * time.Minute))
			tail := codingSession(22, 1, 100)[1:]
			for j := range tail {
				if tail[j].Role == abi.RoleAssistant {
					tail[j].Usage = &abi.Usage{CacheWriteTokens: prev + 400, OutputTokens: 10}
					break
				}
			}
			appendTo(t, again, "billed", "canonical", tail)
			later := getSession(t, again, "billed", "canonical").Cache
			assert.Equal(t, reports+1, later.Requests)
			assert.Equal(t, want[cachestate.TTLExpired]+1, later.Misses[cachestate.TTLExpired])
			assert.GreaterOrEqual(t, len(later.Cost.Compactions), compactions, "the compactions survive")
			assert.Equal(t, c.Cost.Compactions, later.Cost.Compactions[:compactions])
		})
	}
}

// A usage report no call can have (a negative count, one past the
// largest window) is not counted: the append goes on, the report is left
// out of the state.
func TestSessionCacheIgnoresImplausibleUsage(t *testing.T) {
	_, ts := start(t, func(o *Options) { o.Store = store.NewMemory() })
	conv := codingSession(23, 2, 100)
	r := call(t, ts, http.MethodPut, "/v1/sessions/odd", map[string]any{"session": encode(t, "canonical", conv[:2]), "options": map[string]any{"model": "claude-sonnet-4-5", "context_window": 20000}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	send := func(u abi.Usage) response {
		msgs := append([]abi.Message(nil), conv[2:]...)
		for j := range msgs {
			if msgs[j].Role == abi.RoleAssistant {
				msgs[j].Usage = &u
			}
		}
		return call(t, ts, http.MethodPost, "/v1/sessions/odd/messages", map[string]any{"messages": messagesIn(t, "canonical", msgs)})
	}
	// A negative count is refused with the messages.
	send(abi.Usage{InputTokens: 10, CacheReadTokens: -5}).wantError(t, http.StatusBadRequest, CodeBadSession)
	// Past the largest window, the messages are taken, the report not.
	resp := send(abi.Usage{InputTokens: 2 << 30, OutputTokens: 5})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	c := getSession(t, ts, "odd", "canonical").Cache
	assert.Zero(t, c.Requests)
	assert.Zero(t, c.Cost.Bill.USD)
	assert.Nil(t, c.LastRequest)
	assert.Empty(t, c.Misses)
}

// With tokens set, /metrics wants one like every endpoint but /healthz
// and /openapi.json; it answers only GET.
func TestMetricsNeedAToken(t *testing.T) {
	_, ts := start(t, func(o *Options) { o.Tokens = []Token{{Name: "a", Secret: "metrics-token-a"}} })
	call(t, ts, http.MethodGet, "/metrics", nil).wantError(t, http.StatusUnauthorized, CodeUnauthorized)
	call(t, ts, http.MethodGet, "/metrics", nil, "Authorization", "Bearer wrong").wantError(t, http.StatusUnauthorized, CodeUnauthorized)
	r := call(t, ts, http.MethodGet, "/metrics", nil, "Authorization", "Bearer metrics-token-a")
	require.Equal(t, http.StatusOK, r.Status)
	assert.Contains(t, string(r.Body), cachestate.MetricName+`{reason="cold_start"} 0`)
	assert.NotContains(t, string(r.Body), "tenant")
	call(t, ts, http.MethodPost, "/metrics", nil, "Authorization", "Bearer metrics-token-a").wantError(t, http.StatusMethodNotAllowed, CodeMethodNotAllowed)
}
