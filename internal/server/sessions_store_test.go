package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"net/http/httptest"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/redisstore"
	"github.com/compact-host/compact-host/host/store/storetest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openRedis(t testing.TB, r *storetest.RedisServer) *redisstore.Store {
	t.Helper()
	st, err := redisstore.Open(context.Background(), r.URL(), redisstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// sessionRecords counts the compaction records Redis holds for id.
func sessionRecords(t testing.TB, r *storetest.RedisServer, id string) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer c.Close()
	keys, err := c.Keys(context.Background(), redisstore.DefaultPrefix+"rec:session:"+id+":*").Result()
	require.NoError(t, err)
	return len(keys)
}

// Two servers, each with its own Redis client, behind a round robin: the
// appends alternate between them and end as one conversation, compacted
// once per crossing of the threshold.
func TestSessionTwoServersShareRedis(t *testing.T) {
	r := storetest.StartRedis(t)
	a, b := startWithStore(t, openRedis(t, r)), startWithStore(t, openRedis(t, r))
	servers := []*httptest.Server{a, b}
	conv := codingSession(11, 14, 700)
	putSession(t, a, "shared", conv[:2])
	compactions := 0
	for i, c := range chunks(conv[2:]) {
		up := appendTo(t, servers[i%2], "shared", formats.Canonical, c)
		if up.Action == "compacted" {
			compactions++
		}
		assert.Equal(t, compactions, up.Compactions, "append %d", i)
	}
	require.GreaterOrEqual(t, compactions, 2)
	va, vb := getSession(t, a, "shared", formats.Canonical), getSession(t, b, "shared", formats.Canonical)
	assert.JSONEq(t, string(va.Messages), string(vb.Messages), "both servers serve the same context")
	assert.Equal(t, va.Revision, vb.Revision)
	assert.Equal(t, compactions, va.Compactions)
	assert.Equal(t, compactions, sessionRecords(t, r, "shared"), "one compaction record per crossing")
	msgs := canonicalContext(t, va)
	assert.Equal(t, conv[len(conv)-1].Content[0].Text, msgs[len(msgs)-1].Content[0].Text)
}

// Appends to one session from four clients at once, two per server:
// each lands once, in one write each.
func TestSessionConcurrentAppendsAcrossServers(t *testing.T) {
	r := storetest.StartRedis(t)
	a, b := startWithStore(t, openRedis(t, r)), startWithStore(t, openRedis(t, r))
	// A window no test conversation fills: nothing is folded, so every
	// message is still there to count.
	r0 := call(t, a, http.MethodPut, "/v1/sessions/busy", map[string]any{
		"session": encode(t, "canonical", []abi.Message{text(abi.RoleUser, "start")}), "options": map[string]any{"context_window": 1_000_000}})
	require.Equal(t, http.StatusCreated, r0.Status, "%s", r0.Body)
	appendTo(t, a, "busy", formats.Canonical, []abi.Message{text(abi.RoleAssistant, "ready")})

	const clients, rounds = 4, 8
	var wg sync.WaitGroup
	errs := make(chan error, clients*rounds)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := []*httptest.Server{a, b}[c%2]
			for i := range rounds {
				pair := []abi.Message{text(abi.RoleUser, fmt.Sprintf("q-%d-%d", c, i)), text(abi.RoleAssistant, fmt.Sprintf("a-%d-%d", c, i))}
				body, _ := json.Marshal(map[string]any{"messages": pair})
				resp, err := do(ts, http.MethodPost, "/v1/sessions/busy/messages", body)
				if err == nil && resp.Status != http.StatusOK {
					err = fmt.Errorf("client %d append %d: %d %s", c, i, resp.Status, resp.Body)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	v := getSession(t, b, "busy", formats.Canonical)
	assert.Equal(t, int64(2+clients*rounds), v.Revision, "one write per append")
	seen := map[string]int{}
	for _, m := range canonicalContext(t, v) {
		seen[m.Content[0].Text]++
	}
	for c := range clients {
		for i := range rounds {
			assert.Equal(t, 1, seen[fmt.Sprintf("q-%d-%d", c, i)], "q-%d-%d", c, i)
			assert.Equal(t, 1, seen[fmt.Sprintf("a-%d-%d", c, i)], "a-%d-%d", c, i)
		}
	}
}

func TestSessionDiskStoreSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenDisk(dir, store.DiskOptions{})
	require.NoError(t, err)
	first := startWithStore(t, st)
	conv := codingSession(12, 10, 700)
	putSession(t, first, "kept", conv[:2])
	for _, c := range chunks(conv[2:]) {
		appendTo(t, first, "kept", formats.Canonical, c)
	}
	before := getSession(t, first, "kept", formats.Canonical)
	require.Positive(t, before.Compactions)
	first.Close()
	require.NoError(t, st.Close())

	st2, err := store.OpenDisk(dir, store.DiskOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { st2.Close() })
	second := startWithStore(t, st2)
	after := getSession(t, second, "kept", formats.Canonical)
	assert.JSONEq(t, string(before.Messages), string(after.Messages))
	assert.Equal(t, before.Revision, after.Revision)
	assert.Equal(t, before.Summary, after.Summary)
	assert.Equal(t, before.Compactions, after.Compactions)
	up := appendTo(t, second, "kept", formats.Canonical, codingSession(13, 1, 100)[1:])
	assert.Equal(t, before.Revision+1, up.Revision)
}

func TestSessionRedisDownAndBack(t *testing.T) {
	r := storetest.StartRedis(t)
	ts := startWithStore(t, openRedis(t, r))
	conv := codingSession(14, 2, 200)
	putSession(t, ts, "s1", conv[:2])
	r.Kill()

	resp := call(t, ts, http.MethodPost, "/v1/sessions/s1/messages", map[string]any{"messages": messagesIn(t, "canonical", conv[2:4])})
	resp.wantError(t, http.StatusServiceUnavailable, CodeStoreUnavailable)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	call(t, ts, http.MethodGet, "/v1/sessions/s1", nil).wantError(t, http.StatusServiceUnavailable, CodeStoreUnavailable)
	// The stateless endpoints do not need the store.
	call(t, ts, http.MethodPost, "/v1/compact", map[string]any{"session": encode(t, "canonical", conv)}).wantStatus(t, http.StatusOK)
	call(t, ts, http.MethodGet, "/healthz", nil).wantStatus(t, http.StatusOK)

	r.Restart()
	// The restarted Redis persisted nothing: the session is made again.
	eventually(t, "a PUT after Redis came back", func() error {
		resp, err := do(ts, http.MethodPut, "/v1/sessions/s1", map[string]any{"session": encode(t, "canonical", conv[:2]), "options": sessionOptions})
		if err == nil && resp.Status != http.StatusCreated {
			err = fmt.Errorf("status %d: %s", resp.Status, resp.Body)
		}
		return err
	})
	up := appendTo(t, ts, "s1", formats.Canonical, conv[2:4])
	assert.Equal(t, int64(2), up.Revision)
}

// Hostile or mistaken requests get a 4xx and leave the session as it was.
func TestSessionHostileInput(t *testing.T) {
	st, err := store.OpenDisk(t.TempDir(), store.DiskOptions{MaxSessionBytes: 64 << 10})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	_, ts := start(t, func(o *Options) { o.Store, o.MaxRequestBytes = st, 256<<10 })
	conv := codingSession(15, 2, 200)
	putSession(t, ts, "s1", conv[:4])
	before := getSession(t, ts, "s1", formats.Canonical)

	msgs := messagesIn(t, "canonical", conv[4:6])
	orphan := []abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "nobody", Text: "x"}}}}
	stale := int64(7)
	huge := `{"messages":[{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("x", 300<<10) + `"}]}]}`
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"huge body", http.MethodPost, "/v1/sessions/s1/messages", huge, http.StatusRequestEntityTooLarge, CodeTooLarge},
		{"dot-dot ID", http.MethodPost, "/v1/sessions/../x/messages", map[string]any{"messages": msgs}, http.StatusBadRequest, CodeBadRequest},
		{"slash in ID", http.MethodGet, "/v1/sessions/a%2Fb", nil, http.StatusBadRequest, CodeBadRequest},
		{"empty ID", http.MethodGet, "/v1/sessions/", nil, http.StatusBadRequest, CodeBadRequest},
		{"hidden ID", http.MethodPut, "/v1/sessions/.x", map[string]any{"session": encode(t, "canonical", conv[:2])}, http.StatusBadRequest, CodeBadRequest},
		{"long ID", http.MethodGet, "/v1/sessions/" + strings.Repeat("a", 129), nil, http.StatusBadRequest, CodeBadRequest},
		{"invalid JSON", http.MethodPost, "/v1/sessions/s1/messages", `{"messages": [`, http.StatusBadRequest, CodeBadJSON},
		{"unknown field", http.MethodPost, "/v1/sessions/s1/messages", map[string]any{"messages": msgs, "session": "x"}, http.StatusBadRequest, CodeUnknownField},
		{"wrong format", http.MethodPost, "/v1/sessions/s1/messages", map[string]any{"messages": msgs, "format": "claude-code"}, http.StatusBadRequest, CodeUnknownFormat},
		{"messages not an array", http.MethodPost, "/v1/sessions/s1/messages", map[string]any{"messages": "hello"}, http.StatusBadRequest, CodeBadRequest},
		{"no messages", http.MethodPost, "/v1/sessions/s1/messages", map[string]any{"messages": []any{}}, http.StatusBadRequest, CodeBadRequest},
		{"not canonical messages", http.MethodPost, "/v1/sessions/s1/messages", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, http.StatusBadRequest, CodeBadSession},
		{"orphan result", http.MethodPost, "/v1/sessions/s1/messages", map[string]any{"messages": orphan}, http.StatusBadRequest, CodeInvalidSession},
		{"anthropic garbage", http.MethodPost, "/v1/sessions/s1/messages", map[string]any{"messages": []any{42}, "format": "anthropic"}, http.StatusBadRequest, CodeBadSession},
		{"stale revision", http.MethodPost, "/v1/sessions/s1/messages", map[string]any{"messages": msgs, "if_revision": stale}, http.StatusConflict, CodeRevisionConflict},
		{"create over existing", http.MethodPut, "/v1/sessions/s1", map[string]any{"session": encode(t, "canonical", conv[:2]), "if_revision": 0}, http.StatusConflict, CodeRevisionConflict},
		{"dry run", http.MethodPut, "/v1/sessions/s1", map[string]any{"session": encode(t, "canonical", conv[:2]), "options": map[string]any{"dry_run": true}}, http.StatusBadRequest, CodeBadRequest},
		{"over the store's limit", http.MethodPut, "/v1/sessions/s1", map[string]any{"session": encode(t, "canonical", codingSession(16, 2, 6000)), "options": map[string]any{"context_window": 1_000_000}}, http.StatusRequestEntityTooLarge, CodeTooLarge},
		{"unknown session", http.MethodPost, "/v1/sessions/nobody/messages", map[string]any{"messages": msgs}, http.StatusNotFound, CodeSessionNotFound},
		{"unknown session GET", http.MethodGet, "/v1/sessions/nobody", nil, http.StatusNotFound, CodeSessionNotFound},
		{"bad output format", http.MethodGet, "/v1/sessions/s1?output_format=codex", nil, http.StatusBadRequest, CodeUnknownFormat},
		{"wrong method", http.MethodPatch, "/v1/sessions/s1", nil, http.StatusMethodNotAllowed, CodeMethodNotAllowed},
		{"wrong method on messages", http.MethodGet, "/v1/sessions/s1/messages", nil, http.StatusMethodNotAllowed, CodeMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call(t, ts, tc.method, tc.path, tc.body).wantError(t, tc.status, tc.code)
		})
	}
	resp := call(t, ts, http.MethodPatch, "/v1/sessions/s1", nil)
	assert.Equal(t, "GET, PUT, DELETE", resp.Header.Get("Allow"))

	after := getSession(t, ts, "s1", formats.Canonical)
	assert.Equal(t, before.Revision, after.Revision, "a refused request wrote")
	assert.True(t, bytes.Equal(before.Messages, after.Messages), "a refused request changed the messages")

	// The session still takes a proper append, and goes away on DELETE.
	appendTo(t, ts, "s1", formats.Canonical, conv[4:6])
	call(t, ts, http.MethodDelete, "/v1/sessions/s1", nil).wantStatus(t, http.StatusOK)
	call(t, ts, http.MethodGet, "/v1/sessions/s1", nil).wantError(t, http.StatusNotFound, CodeSessionNotFound)
	call(t, ts, http.MethodDelete, "/v1/sessions/s1", nil).wantError(t, http.StatusNotFound, CodeSessionNotFound)
}

// roundTrips counts what reaches Redis: one command or one pipeline is
// one round trip.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// An append that does not compact costs six round trips: the lock, the
// read, the tenant's quota ledger read and written, the append, the
// release. Only the new messages travel back.
func TestSessionAppendRoundTrips(t *testing.T) {
	r := storetest.StartRedis(t)
	hook := &roundTrips{}
	st, err := redisstore.Open(context.Background(), r.URL(), redisstore.Options{Hook: hook})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ts := startWithStore(t, st)
	conv := codingSession(17, 6, 100)
	putSession(t, ts, "rt", conv[:2])
	// The first calls load the scripts and fill the pool.
	appendTo(t, ts, "rt", formats.Canonical, conv[2:4])
	appendTo(t, ts, "rt", formats.Canonical, conv[4:6])
	before := hook.n.Load()
	const n = 6
	for i := range n {
		up := appendTo(t, ts, "rt", formats.Canonical, conv[6+2*i:8+2*i])
		require.Equal(t, "none", up.Action)
	}
	assert.Equal(t, int64(6*n), hook.n.Load()-before, "round trips for %d appends", n)
}

// BenchmarkSessionAppendHTTP measures an append through the API (one
// message, no compaction) and the store round trips it costs.
func BenchmarkSessionAppendHTTP(b *testing.B) {
	for _, kind := range []string{"memory", "disk", "redis"} {
		b.Run(kind, func(b *testing.B) {
			hook := &roundTrips{}
			var st store.Store
			switch kind {
			case "memory":
				st = store.NewMemory()
			case "disk":
				d, err := store.OpenDisk(b.TempDir(), store.DiskOptions{})
				require.NoError(b, err)
				st = d
			case "redis":
				r := storetest.StartRedis(b)
				rs, err := redisstore.Open(context.Background(), r.URL(), redisstore.Options{Hook: hook})
				require.NoError(b, err)
				st = rs
			}
			b.Cleanup(func() { st.Close() })
			// A window the benchmark does not fill: appends never compact.
			ts := startWithStore(b, st)
			resp := call(b, ts, http.MethodPut, "/v1/sessions/bench", map[string]any{
				"session": encode(b, "canonical", []abi.Message{text(abi.RoleUser, "start")}), "options": map[string]any{"context_window": 10_000_000}})
			require.Equal(b, http.StatusCreated, resp.Status, "%s", resp.Body)
			user, _ := json.Marshal(map[string]any{"messages": []abi.Message{text(abi.RoleAssistant, strings.Repeat("a reply ", 30))}})
			tool, _ := json.Marshal(map[string]any{"messages": []abi.Message{text(abi.RoleUser, strings.Repeat("a request ", 30))}})
			// Untimed appends warm what the first request of a process
			// pays (the pool's connections, the scripts).
			for range 10 {
				r, err := do(ts, http.MethodPost, "/v1/sessions/bench/messages", user)
				require.NoError(b, err)
				require.Equal(b, http.StatusOK, r.Status, "%s", r.Body)
				r, err = do(ts, http.MethodPost, "/v1/sessions/bench/messages", tool)
				require.NoError(b, err)
				require.Equal(b, http.StatusOK, r.Status, "%s", r.Body)
			}
			before := hook.n.Load()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				body := user
				if i%2 == 1 {
					body = tool
				}
				r, err := do(ts, http.MethodPost, "/v1/sessions/bench/messages", body)
				if err != nil || r.Status != http.StatusOK {
					b.Fatalf("append %d: %v %d %s", i, err, r.Status, r.Body)
				}
			}
			b.StopTimer()
			if kind == "redis" {
				b.ReportMetric(float64(hook.n.Load()-before)/float64(b.N), "roundtrips/op")
			}
		})
	}
}
