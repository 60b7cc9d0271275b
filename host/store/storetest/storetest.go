// Package storetest checks that a store.Store keeps the contract the proxy
// and the service rely on, as testing/slogtest does for slog handlers.
// Every implementation runs the same kit:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
//	}
//
// The package also starts a real redis-server for tests (StartRedis), so
// that every package whose tests need Redis starts it the same way.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lease is the short lease the kit uses where it waits for one to end.
const Lease = 200 * time.Millisecond

// waitFor bounds every wait of the kit: generous, so a loaded machine
// does not fail a test that is only slow.
const waitFor = 30 * time.Second

// Run runs the conformance kit, with the session tests when the store
// implements store.Sessions. open returns a new, empty store for each
// subtest and must arrange its Close (the kit closes it too: Close must
// tolerate a second call).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"NotFound", testNotFound},
		{"LatestMovesWithPut", testLatestMoves},
		{"CopiesNotShared", testCopies},
		{"PutNeedsKey", testPutNeedsKey},
		{"LockExcludes", testLockExcludes},
		{"LeaseExpires", testLeaseExpires},
		{"ReleaseAfterRetake", testReleaseAfterRetake},
		{"Concurrent", testConcurrent},
		{"CancelledContext", testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			require.NotNil(t, s, "open returned no store")
			t.Cleanup(func() { s.Close() })
			tc.run(t, s)
		})
	}
	for _, tc := range sessionTests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			require.NotNil(t, s, "open returned no store")
			t.Cleanup(func() { s.Close() })
			ss, ok := s.(store.Sessions)
			if !ok {
				t.Skipf("%T keeps no sessions (store.Sessions)", s)
			}
			tc.run(t, ss)
		})
	}
}

// Sample is a record with every field set, Replacement holding bytes that
// a careless encoding would change (invalid UTF-8, NUL, JSON escapes).
func Sample(key, conversation string) *store.Record {
	return &store.Record{
		Key:          key,
		Conversation: conversation,
		PrefixHash:   "sha256:" + key + "-prefix",
		FoldedCount:  42,
		Replacement:  []byte("[{\"role\":\"user\",\"content\":\"<summary>\\u2028 \\\"quoted\\\"</summary>\"}]\x00\xff\xfe\n\r\t"),
		Summary:      "The user asked for X; files a.go, b.go were modified.\n\tÜnïcödé ✓",
		Strategy:     "structured",
		Offline:      true,
		TokensBefore: 180_000,
		TokensAfter:  12_345,
		CostUSD:      0.0123456789,
		CreatedAt:    time.Date(2026, 11, 24, 7, 30, 1, 123456789, time.UTC),
	}
}

// AssertSame checks that got carries every field of want, the
// Replacement byte for byte and CreatedAt as the same instant.
func AssertSame(t *testing.T, want, got *store.Record) {
	t.Helper()
	if !assert.NotNil(t, got) {
		return
	}
	assert.True(t, bytes.Equal(want.Replacement, got.Replacement), "Replacement bytes differ: want %q, got %q", want.Replacement, got.Replacement)
	assert.True(t, want.CreatedAt.Equal(got.CreatedAt), "CreatedAt: want %v, got %v", want.CreatedAt, got.CreatedAt)
	w, g := *want, *got
	w.CreatedAt, g.CreatedAt = time.Time{}, time.Time{}
	w.Replacement, g.Replacement = nil, nil
	assert.Equal(t, w, g)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

func testRoundTrip(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	want := Sample("k1", "conv-a")
	require.NoError(t, s.Put(ctx, want))
	got, err := s.Get(ctx, "k1")
	require.NoError(t, err)
	AssertSame(t, want, got)
	latest, err := s.Latest(ctx, "conv-a")
	require.NoError(t, err)
	AssertSame(t, want, latest)

	// Keys and conversations are opaque strings: a path separator or a
	// colon must not escape or collide.
	odd := Sample("../k:1/../*", "conv/../b:*")
	odd.Replacement = nil
	odd.Offline = false
	require.NoError(t, s.Put(ctx, odd))
	got, err = s.Get(ctx, odd.Key)
	require.NoError(t, err)
	assert.Empty(t, got.Replacement)
	AssertSame(t, odd, got)
	got, err = s.Get(ctx, "k1")
	require.NoError(t, err)
	AssertSame(t, want, got)
}

func testNotFound(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	_, err := s.Get(ctx, "missing")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.Latest(ctx, "missing")
	assert.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.Put(ctx, Sample("k1", "conv-a")))
	_, err = s.Latest(ctx, "conv-b")
	assert.ErrorIs(t, err, store.ErrNotFound, "a conversation with no record of its own")
	_, err = s.Get(ctx, "conv-a")
	assert.ErrorIs(t, err, store.ErrNotFound, "a conversation ID is not a record key")
}

func testLatestMoves(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	first := Sample("k1", "conv-a")
	require.NoError(t, s.Put(ctx, first))
	second := Sample("k2", "conv-a")
	second.FoldedCount = 80
	second.Summary = "merged summary"
	second.CreatedAt = first.CreatedAt.Add(time.Minute)
	require.NoError(t, s.Put(ctx, second))
	other := Sample("k3", "conv-b")
	require.NoError(t, s.Put(ctx, other))

	latest, err := s.Latest(ctx, "conv-a")
	require.NoError(t, err)
	AssertSame(t, second, latest)
	latest, err = s.Latest(ctx, "conv-b")
	require.NoError(t, err)
	AssertSame(t, other, latest)
	old, err := s.Get(ctx, "k1")
	require.NoError(t, err, "an older record stays reachable by its key")
	AssertSame(t, first, old)
}

func testCopies(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	rec := Sample("k1", "conv-a")
	want := Sample("k1", "conv-a")
	require.NoError(t, s.Put(ctx, rec))
	rec.Replacement[0] = 'X'
	rec.Summary = "changed after Put"
	got, err := s.Get(ctx, "k1")
	require.NoError(t, err)
	AssertSame(t, want, got)
	got.Replacement[0] = 'Y'
	again, err := s.Latest(ctx, "conv-a")
	require.NoError(t, err)
	AssertSame(t, want, again)
}

func testPutNeedsKey(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	assert.Error(t, s.Put(ctx, Sample("", "conv-a")))
	_, err := s.Latest(ctx, "conv-a")
	assert.ErrorIs(t, err, store.ErrNotFound, "a rejected Put moved the latest record")
}

func testLockExcludes(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	a, err := s.Lock(ctx, "conv-a", time.Minute)
	require.NoError(t, err)
	_, err = s.Lock(ctx, "conv-a", time.Minute)
	assert.ErrorIs(t, err, store.ErrLocked, "a second holder got a held lock")
	b, err := s.Lock(ctx, "conv-b", time.Minute)
	require.NoError(t, err, "one conversation's lock held another's")
	require.NoError(t, a.Release(ctx))
	c, err := s.Lock(ctx, "conv-a", time.Minute)
	require.NoError(t, err, "a released lock could not be taken")
	assert.NoError(t, c.Release(ctx))
	assert.NoError(t, b.Release(ctx))
	assert.ErrorIs(t, c.Release(ctx), store.ErrLeaseLost, "a second Release of one lock")
}

// takeWhenFree polls Lock until the current holder's lease ends.
func takeWhenFree(t *testing.T, ctx context.Context, s store.Store, conversation string, lease time.Duration) store.Lock {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		l, err := s.Lock(ctx, conversation, lease)
		if err == nil {
			return l
		}
		require.ErrorIs(t, err, store.ErrLocked)
		require.True(t, time.Now().Before(deadline), "the lock was still held %v after a %v lease", waitFor, Lease)
		time.Sleep(Lease / 10)
	}
}

func testLeaseExpires(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	_, err := s.Lock(ctx, "conv-a", Lease)
	require.NoError(t, err)
	// The first holder never releases, as a crashed replica would not.
	b := takeWhenFree(t, ctx, s, "conv-a", time.Minute)
	_, err = s.Lock(ctx, "conv-a", time.Minute)
	assert.ErrorIs(t, err, store.ErrLocked, "the new holder's lock is not held")
	assert.NoError(t, b.Release(ctx))
}

func testReleaseAfterRetake(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	a, err := s.Lock(ctx, "conv-a", Lease)
	require.NoError(t, err)
	b := takeWhenFree(t, ctx, s, "conv-a", time.Minute)
	assert.ErrorIs(t, a.Release(ctx), store.ErrLeaseLost)
	_, err = s.Lock(ctx, "conv-a", time.Minute)
	assert.ErrorIs(t, err, store.ErrLocked, "the old holder's Release freed the new holder's lock")
	assert.NoError(t, b.Release(ctx))

	// A lease that ran out with nobody taking over is lost all the same.
	// Sleeping past the lease can only leave it more expired, so this
	// wait cannot make the test flaky.
	c, err := s.Lock(ctx, "conv-b", Lease)
	require.NoError(t, err)
	time.Sleep(2 * Lease)
	assert.ErrorIs(t, c.Release(ctx), store.ErrLeaseLost)
	d, err := s.Lock(ctx, "conv-b", time.Minute)
	require.NoError(t, err, "an expired lock's Release left it held")
	assert.NoError(t, d.Release(ctx))
}

func testConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const workers, rounds, conversations = 8, 12, 3
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*4)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				conv := fmt.Sprintf("conv-%d", (w+r)%conversations)
				rec := Sample(fmt.Sprintf("k-%d-%d", w, r), conv)
				rec.FoldedCount = w*1000 + r
				if err := s.Put(ctx, rec); err != nil {
					errs <- fmt.Errorf("put %s: %w", rec.Key, err)
					continue
				}
				got, err := s.Get(ctx, rec.Key)
				if err != nil {
					errs <- fmt.Errorf("get %s: %w", rec.Key, err)
				} else if got.FoldedCount != rec.FoldedCount || !bytes.Equal(got.Replacement, rec.Replacement) {
					errs <- fmt.Errorf("get %s: another writer's record came back", rec.Key)
				}
				if _, err := s.Latest(ctx, conv); err != nil {
					errs <- fmt.Errorf("latest %s: %w", conv, err)
				}
				l, err := s.Lock(ctx, conv, time.Minute)
				if errors.Is(err, store.ErrLocked) {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("lock %s: %w", conv, err)
					continue
				}
				if err := l.Release(ctx); err != nil {
					errs <- fmt.Errorf("release %s: %w", conv, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	for c := range conversations {
		conv := fmt.Sprintf("conv-%d", c)
		latest, err := s.Latest(ctx, conv)
		require.NoError(t, err)
		assert.Equal(t, conv, latest.Conversation)
		l, err := s.Lock(ctx, conv, time.Minute)
		require.NoError(t, err, "a lock stayed held after every holder released")
		assert.NoError(t, l.Release(ctx))
	}
}

func testCancelled(t *testing.T, s store.Store) {
	require.NoError(t, s.Put(ctxT(t), Sample("k1", "conv-a")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Get(ctx, "k1")
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.Latest(ctx, "conv-a")
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, s.Put(ctx, Sample("k2", "conv-a")), context.Canceled)
	_, err = s.Lock(ctx, "conv-a", time.Minute)
	assert.ErrorIs(t, err, context.Canceled)

	latest, err := s.Latest(ctxT(t), "conv-a")
	require.NoError(t, err)
	assert.Equal(t, "k1", latest.Key, "a Put with a cancelled context was applied")
	l, err := s.Lock(ctxT(t), "conv-a", time.Minute)
	require.NoError(t, err, "a Lock with a cancelled context took the lock")
	assert.NoError(t, l.Release(ctxT(t)))
}
