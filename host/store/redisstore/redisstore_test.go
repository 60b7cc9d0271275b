package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/redisstore"
	"github.com/compact-host/compact-host/host/store/storetest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var prefixes atomic.Int64

// open connects to srv under a prefix no other test uses, so tests share
// one server without seeing each other's keys.
func open(t *testing.T, srv *storetest.RedisServer, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = fmt.Sprintf("test%d:", prefixes.Add(1))
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = patient
	}
	s, err := redisstore.Open(context.Background(), patientURL(srv), opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// patient is the tests' timeout for a server that is up: a loaded machine
// may not schedule redis-server for longer than the production defaults
// allow, and a test must not fail for that. The tests of a server that is
// down or stalled get their errors from a refused connection or from a
// timeout they set short themselves.
const patient = 30 * time.Second

func patientURL(srv *storetest.RedisServer) string {
	return srv.URL() + "?read_timeout=30s&write_timeout=30s&dial_timeout=30s"
}

func TestConformance(t *testing.T) {
	srv := storetest.StartRedis(t)
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, srv, redisstore.Options{}) })
}

func TestTwoClientsShare(t *testing.T) {
	srv := storetest.StartRedis(t)
	ctx := context.Background()
	a := open(t, srv, redisstore.Options{Prefix: "shared:"})
	b := open(t, srv, redisstore.Options{Prefix: "shared:"})
	want := storetest.Sample("k1", "conv-a")
	require.NoError(t, a.Put(ctx, want))
	got, err := b.Latest(ctx, "conv-a")
	require.NoError(t, err)
	storetest.AssertSame(t, want, got)
	got, err = b.Get(ctx, "k1")
	require.NoError(t, err)
	storetest.AssertSame(t, want, got)

	held, err := a.Lock(ctx, "conv-a", time.Minute)
	require.NoError(t, err)
	_, err = b.Lock(ctx, "conv-a", time.Minute)
	assert.ErrorIs(t, err, store.ErrLocked)
	require.NoError(t, held.Release(ctx))
	held, err = b.Lock(ctx, "conv-a", time.Minute)
	require.NoError(t, err)
	assert.NoError(t, held.Release(ctx))

	other := open(t, srv, redisstore.Options{Prefix: "other:"})
	_, err = other.Latest(ctx, "conv-a")
	assert.ErrorIs(t, err, store.ErrNotFound, "a prefix does not keep stores apart")
}

// countHook counts what reaches the network: one command or one pipeline
// (a MULTI/EXEC included) is one round trip.
type countHook struct{ roundTrips atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.roundTrips.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.roundTrips.Add(1)
		return next(ctx, cmds)
	}
}

func TestLatestIsOneRoundTrip(t *testing.T) {
	srv := storetest.StartRedis(t)
	ctx := context.Background()
	hook := &countHook{}
	s := open(t, srv, redisstore.Options{Hook: hook})
	require.NoError(t, s.Put(ctx, storetest.Sample("k1", "conv-a")))
	_, err := srv.Command("CONFIG", "RESETSTAT")
	require.NoError(t, err)
	before := hook.roundTrips.Load()

	const n = 25
	for range n {
		rec, err := s.Latest(ctx, "conv-a")
		require.NoError(t, err)
		assert.Equal(t, "k1", rec.Key)
	}
	assert.Equal(t, int64(n), hook.roundTrips.Load()-before, "round trips for %d Latest calls", n)
	gets, err := srv.CommandCalls("get")
	require.NoError(t, err)
	assert.Equal(t, n, gets, "GET commands the server ran for %d Latest calls", n)

	before = hook.roundTrips.Load()
	require.NoError(t, s.Put(ctx, storetest.Sample("k2", "conv-a")))
	assert.Equal(t, int64(1), hook.roundTrips.Load()-before, "round trips for one Put")
	execs, err := srv.CommandCalls("exec")
	require.NoError(t, err)
	assert.Equal(t, 1, execs, "a Put is one MULTI/EXEC")
}

func TestRecordsExpire(t *testing.T) {
	srv := storetest.StartRedis(t)
	ctx := context.Background()
	s := open(t, srv, redisstore.Options{TTL: 100 * time.Millisecond})
	require.NoError(t, s.Put(ctx, storetest.Sample("k1", "conv-a")))
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, gerr := s.Get(ctx, "k1")
		_, lerr := s.Latest(ctx, "conv-a")
		if gerr != nil && lerr != nil {
			assert.ErrorIs(t, gerr, store.ErrNotFound)
			assert.ErrorIs(t, lerr, store.ErrNotFound)
			break
		}
		require.True(t, time.Now().Before(deadline), "a record with a 100ms TTL outlived 10s")
		time.Sleep(20 * time.Millisecond)
	}
}

func TestURLParameters(t *testing.T) {
	srv := storetest.StartRedis(t)
	ctx := context.Background()
	s, err := redisstore.Open(ctx, patientURL(srv)+"&prefix=fromurl:&ttl=1h", redisstore.Options{CallTimeout: patient})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Put(ctx, storetest.Sample("k1", "conv-a")))
	ttl, err := srv.Command("PTTL", "fromurl:rec:k1")
	require.NoError(t, err)
	assert.Regexp(t, `^3[0-9]{6}$`, ttl, "the record's TTL in ms is about an hour")

	_, err = redisstore.Open(ctx, srv.URL()+"?ttl=forever", redisstore.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ttl")
	_, err = redisstore.Open(ctx, srv.URL()+"?no_such_option=1", redisstore.Options{})
	assert.Error(t, err)
	_, err = redisstore.Open(ctx, "redis://user:secret@127.0.0.1:1/0?ttl=x", redisstore.Options{})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret", "a password leaked into an error")
}

func TestNothingListening(t *testing.T) {
	// A port that was free a moment ago: nothing answers there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	_, err = redisstore.Open(context.Background(), "redis://"+addr+"/0", redisstore.Options{})
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.Less(t, time.Since(start), 10*time.Second)
}

// TestServerRestart kills the server under a live store: calls fail fast
// with ErrUnavailable, and once a server answers on the same port the
// same store works again.
func TestServerRestart(t *testing.T) {
	srv := storetest.StartRedis(t)
	ctx := context.Background()
	s := open(t, srv, redisstore.Options{})
	require.NoError(t, s.Put(ctx, storetest.Sample("k1", "conv-a")))

	srv.Kill()
	calls := map[string]func() error{
		"Get":    func() error { _, err := s.Get(ctx, "k1"); return err },
		"Latest": func() error { _, err := s.Latest(ctx, "conv-a"); return err },
		"Put":    func() error { return s.Put(ctx, storetest.Sample("k2", "conv-a")) },
		"Lock":   func() error { _, err := s.Lock(ctx, "conv-a", time.Minute); return err },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		assert.ErrorIs(t, err, store.ErrUnavailable, "%s with the server down", name)
		// Generous: the point is no minute-long hang.
		assert.Less(t, time.Since(start), 10*time.Second, "%s with the server down", name)
	}

	srv.Restart()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := s.Put(ctx, storetest.Sample("k3", "conv-a"))
		if err == nil {
			break
		}
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.True(t, time.Now().Before(deadline), "the store did not reconnect to the restarted server: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
	rec, err := s.Latest(ctx, "conv-a")
	require.NoError(t, err)
	assert.Equal(t, "k3", rec.Key)
	_, err = s.Get(ctx, "k1")
	assert.ErrorIs(t, err, store.ErrNotFound, "the restarted server persists nothing")
	l, err := s.Lock(ctx, "conv-a", time.Minute)
	require.NoError(t, err)
	assert.NoError(t, l.Release(ctx))
}

// TestStalledServer: a server that accepts but never answers (stopped
// with SIGSTOP, as a hung one) costs a call its timeout, not a hang.
func TestStalledServer(t *testing.T) {
	srv := storetest.StartRedis(t)
	ctx := context.Background()
	s := open(t, srv, redisstore.Options{CallTimeout: 300 * time.Millisecond})
	require.NoError(t, s.Put(ctx, storetest.Sample("k1", "conv-a")))
	srv.Stop()
	defer srv.Continue()
	start := time.Now()
	_, err := s.Latest(ctx, "conv-a")
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.Less(t, time.Since(start), 10*time.Second)
	srv.Continue()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := s.Latest(ctx, "conv-a")
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the store did not recover after the server resumed: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
}

func TestOversizedRecord(t *testing.T) {
	srv := storetest.StartRedis(t)
	ctx := context.Background()
	s := open(t, srv, redisstore.Options{MaxRecordBytes: 1 << 10})
	rec := storetest.Sample("big", "conv-a")
	rec.Replacement = make([]byte, 2<<10)
	err := s.Put(ctx, rec)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_record_bytes")
}

// The Redis benchmarks run on loopback against a real server and report
// round trips per call, counted by a hook and by the server's own command
// statistics (cmd, as INFO commandstats names it).
func benchRedis(b *testing.B, loop func(*testing.B, store.Store), cmd string) {
	srv := storetest.StartRedis(b)
	hook := &countHook{}
	s, err := redisstore.Open(context.Background(), patientURL(srv), redisstore.Options{Hook: hook, CallTimeout: patient})
	require.NoError(b, err)
	defer s.Close()
	storetest.Preload(b, s)
	_, err = srv.Command("CONFIG", "RESETSTAT")
	require.NoError(b, err)
	before := hook.roundTrips.Load()
	loop(b, s)
	b.StopTimer()
	calls, err := srv.CommandCalls(cmd)
	require.NoError(b, err)
	b.ReportMetric(float64(hook.roundTrips.Load()-before)/float64(b.N), "roundtrips/op")
	b.ReportMetric(float64(calls)/float64(b.N), "server_"+cmd+"/op")
}

func BenchmarkRedisLatestHit(b *testing.B) { benchRedis(b, storetest.LoopLatestHit, "get") }

// benchRedisSessions is benchRedis for the session loops: cmd counts the
// server's scripts run (evalsha).
func benchRedisSessions(b *testing.B, loop func(*testing.B, store.Store)) {
	srv := storetest.StartRedis(b)
	hook := &countHook{}
	s, err := redisstore.Open(context.Background(), patientURL(srv), redisstore.Options{Hook: hook, CallTimeout: patient})
	require.NoError(b, err)
	defer s.Close()
	storetest.PreloadSessions(b, s)
	_, err = srv.Command("CONFIG", "RESETSTAT")
	require.NoError(b, err)
	before := hook.roundTrips.Load()
	loop(b, s)
	b.StopTimer()
	scripts, err := srv.CommandCalls("evalsha")
	require.NoError(b, err)
	b.ReportMetric(float64(hook.roundTrips.Load()-before)/float64(b.N), "roundtrips/op")
	b.ReportMetric(float64(scripts)/float64(b.N), "server_evalsha/op")
}

func BenchmarkRedisSessionAppend(b *testing.B) {
	benchRedisSessions(b, func(b *testing.B, s store.Store) { storetest.LoopSessionAppend(b, s.(store.Sessions)) })
}
func BenchmarkRedisSessionUpdate(b *testing.B) { benchRedisSessions(b, storetest.LoopSessionUpdate) }
func BenchmarkRedisPut(b *testing.B)           { benchRedis(b, storetest.LoopPut, "exec") }

// A session read is one round trip (MULTI/EXEC of HGETALL and GET), an
// append or a put one script.
func TestSessionCallsAreOneRoundTrip(t *testing.T) {
	srv := storetest.StartRedis(t)
	ctx := context.Background()
	hook := &countHook{}
	s := open(t, srv, redisstore.Options{Hook: hook})
	_, err := s.PutSession(ctx, storetest.SampleSession("s1"), 0)
	require.NoError(t, err)
	_, err = s.AppendSession(ctx, "s1", []byte("warm\n"), store.AnyRevision)
	require.NoError(t, err, "the first call of each script loads it")
	// The pool may dial a second connection on the first call after a
	// script: setup, not a cost of each call.
	_, err = s.GetSession(ctx, "s1")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"get", func() error { _, err := s.GetSession(ctx, "s1"); return err }},
		{"append", func() error { _, err := s.AppendSession(ctx, "s1", []byte("x\n"), store.AnyRevision); return err }},
		{"put", func() error {
			_, err := s.PutSession(ctx, storetest.SampleSession("s1"), store.AnyRevision)
			return err
		}},
	} {
		before := hook.roundTrips.Load()
		require.NoError(t, tc.call(), tc.name)
		assert.Equal(t, int64(1), hook.roundTrips.Load()-before, "round trips of one %s", tc.name)
	}
}

func TestSessionsExpire(t *testing.T) {
	srv := storetest.StartRedis(t)
	ctx := context.Background()
	s := open(t, srv, redisstore.Options{TTL: 300 * time.Millisecond, Prefix: "ttl:"})
	_, err := s.PutSession(ctx, storetest.SampleSession("s1"), 0)
	require.NoError(t, err)
	ttl, err := srv.Command("PTTL", "ttl:sessmsg:s1")
	require.NoError(t, err)
	assert.NotEqual(t, "-1", ttl, "the messages key has a TTL")
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.GetSession(ctx, "s1")
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		require.NoError(t, err)
		require.True(t, time.Now().Before(deadline), "the session outlived its TTL")
		time.Sleep(50 * time.Millisecond)
	}
}
