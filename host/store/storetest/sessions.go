package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sessionTests run, as part of Run, on every store that implements
// store.Sessions.
var sessionTests = []struct {
	name string
	run  func(t *testing.T, s store.Sessions)
}{
	{"SessionRoundTrip", testSessionRoundTrip},
	{"SessionNotFound", testSessionNotFound},
	{"SessionRevisions", testSessionRevisions},
	{"SessionAppend", testSessionAppend},
	{"SessionTooLarge", testSessionTooLarge},
	{"SessionDelete", testSessionDelete},
	{"SessionConcurrentAppends", testSessionConcurrentAppends},
	{"SessionConcurrentReadModifyWrite", testSessionConcurrentCAS},
	{"SessionCancelledContext", testSessionCancelled},
}

// SampleSession is a session with every field set, Messages holding
// bytes a careless encoding would change.
func SampleSession(id string) *store.Session {
	return &store.Session{
		ID:           id,
		Messages:     []byte("{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"\\u2028 \\\"q\\\"\"}}\n\x00\xff\r\t"),
		Settings:     []byte(`{"options":{"context_window":20000}}`),
		LatestRecord: "session:" + id + ":c1",
		Compactions:  3,
	}
}

func assertSession(t *testing.T, want, got *store.Session, rev int64) {
	t.Helper()
	if !assert.NotNil(t, got) {
		return
	}
	assert.Equal(t, want.ID, got.ID)
	assert.Equal(t, rev, got.Revision)
	assert.True(t, bytes.Equal(want.Messages, got.Messages), "Messages differ: want %q, got %q", want.Messages, got.Messages)
	assert.Equal(t, string(want.Settings), string(got.Settings))
	assert.Equal(t, want.LatestRecord, got.LatestRecord)
	assert.Equal(t, want.Compactions, got.Compactions)
	assert.WithinDuration(t, time.Now(), got.UpdatedAt, time.Hour, "UpdatedAt is the time of the write")
}

func testSessionRoundTrip(t *testing.T, s store.Sessions) {
	ctx := ctxT(t)
	want := SampleSession("s1")
	rev, err := s.PutSession(ctx, want, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(1), rev)
	got, err := s.GetSession(ctx, "s1")
	require.NoError(t, err)
	assertSession(t, want, got, 1)

	// IDs are opaque: separators must not escape or collide.
	odd := SampleSession("../s1:x/*")
	odd.Settings, odd.LatestRecord, odd.Compactions = nil, "", 0
	_, err = s.PutSession(ctx, odd, 0)
	require.NoError(t, err)
	got, err = s.GetSession(ctx, odd.ID)
	require.NoError(t, err)
	assertSession(t, odd, got, 1)
	got, err = s.GetSession(ctx, "s1")
	require.NoError(t, err)
	assertSession(t, want, got, 1)

	// The caller's copies are its own.
	got.Messages[0] = 'X'
	again, err := s.GetSession(ctx, "s1")
	require.NoError(t, err)
	assertSession(t, want, again, 1)
}

func testSessionNotFound(t *testing.T, s store.Sessions) {
	ctx := ctxT(t)
	_, err := s.GetSession(ctx, "missing")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.AppendSession(ctx, "missing", []byte("x\n"), store.AnyRevision)
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetSession(ctx, "missing")
	assert.ErrorIs(t, err, store.ErrNotFound, "an append created a session")
	assert.ErrorIs(t, s.DeleteSession(ctx, "missing"), store.ErrNotFound)
	_, err = s.PutSession(ctx, &store.Session{ID: ""}, 0)
	assert.Error(t, err, "a session without an ID")
	_, err = s.PutSession(ctx, &store.Session{ID: strings.Repeat("x", store.MaxIDBytes+1)}, 0)
	assert.Error(t, err, "an ID over MaxIDBytes")
}

func testSessionRevisions(t *testing.T, s store.Sessions) {
	ctx := ctxT(t)
	first := SampleSession("s1")
	_, err := s.PutSession(ctx, first, 0)
	require.NoError(t, err)
	second := SampleSession("s1")
	second.Messages = []byte("second\n")
	_, err = s.PutSession(ctx, second, 0)
	assert.ErrorIs(t, err, store.ErrConflict, "a create over an existing session")
	rev, err := s.PutSession(ctx, second, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(2), rev)
	_, err = s.PutSession(ctx, first, 1)
	assert.ErrorIs(t, err, store.ErrConflict, "a write at a stale revision")
	_, err = s.AppendSession(ctx, "s1", []byte("stale\n"), 1)
	assert.ErrorIs(t, err, store.ErrConflict, "an append at a stale revision")
	got, err := s.GetSession(ctx, "s1")
	require.NoError(t, err)
	assertSession(t, second, got, 2)

	rev, err = s.AppendSession(ctx, "s1", []byte("third\n"), 2)
	require.NoError(t, err)
	assert.Equal(t, int64(3), rev)
	rev, err = s.PutSession(ctx, first, store.AnyRevision)
	require.NoError(t, err)
	assert.Equal(t, int64(4), rev)
	_, err = s.PutSession(ctx, first, -2)
	assert.Error(t, err, "an ifRevision below AnyRevision")
}

func testSessionAppend(t *testing.T, s store.Sessions) {
	ctx := ctxT(t)
	want := SampleSession("s1")
	_, err := s.PutSession(ctx, want, 0)
	require.NoError(t, err)
	before, err := s.GetSession(ctx, "s1")
	require.NoError(t, err)
	rev, err := s.AppendSession(ctx, "s1", []byte("more\x00\xff\n"), store.AnyRevision)
	require.NoError(t, err)
	assert.Equal(t, int64(2), rev)
	rev, err = s.AppendSession(ctx, "s1", nil, 2)
	require.NoError(t, err, "an empty append")
	assert.Equal(t, int64(3), rev)
	got, err := s.GetSession(ctx, "s1")
	require.NoError(t, err)
	want.Messages = append(append([]byte(nil), want.Messages...), "more\x00\xff\n"...)
	assertSession(t, want, got, 3)
	assertSession(t, SampleSession("s1"), before, 1)
}

func testSessionTooLarge(t *testing.T, s store.Sessions) {
	ctx := ctxT(t)
	big := &store.Session{ID: "s1", Messages: bytes.Repeat([]byte("x"), store.DefaultMaxSessionBytes+1)}
	_, err := s.PutSession(ctx, big, 0)
	assert.ErrorIs(t, err, store.ErrSessionTooLarge)
	_, err = s.GetSession(ctx, "s1")
	assert.ErrorIs(t, err, store.ErrNotFound, "a refused Put was applied")

	near := &store.Session{ID: "s1", Messages: bytes.Repeat([]byte("x"), store.DefaultMaxSessionBytes-10)}
	_, err = s.PutSession(ctx, near, 0)
	require.NoError(t, err)
	_, err = s.AppendSession(ctx, "s1", bytes.Repeat([]byte("y"), 11), store.AnyRevision)
	assert.ErrorIs(t, err, store.ErrSessionTooLarge)
	rev, err := s.AppendSession(ctx, "s1", bytes.Repeat([]byte("y"), 10), store.AnyRevision)
	require.NoError(t, err, "an append up to the limit")
	assert.Equal(t, int64(2), rev)
	got, err := s.GetSession(ctx, "s1")
	require.NoError(t, err)
	assert.Len(t, got.Messages, store.DefaultMaxSessionBytes)
}

func testSessionDelete(t *testing.T, s store.Sessions) {
	ctx := ctxT(t)
	_, err := s.PutSession(ctx, SampleSession("s1"), 0)
	require.NoError(t, err)
	_, err = s.PutSession(ctx, SampleSession("s2"), 0)
	require.NoError(t, err)
	require.NoError(t, s.DeleteSession(ctx, "s1"))
	_, err = s.GetSession(ctx, "s1")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.AppendSession(ctx, "s1", []byte("x"), store.AnyRevision)
	assert.ErrorIs(t, err, store.ErrNotFound, "an append revived a deleted session")
	rev, err := s.PutSession(ctx, SampleSession("s1"), 0)
	require.NoError(t, err, "a deleted session's ID can be created again")
	assert.Equal(t, int64(1), rev)
	_, err = s.GetSession(ctx, "s2")
	assert.NoError(t, err, "deleting one session removed another")
}

// testSessionConcurrentAppends appends from many goroutines to one
// session: every append lands once, and the revisions each goroutine
// sees are distinct and increase.
func testSessionConcurrentAppends(t *testing.T, s store.Sessions) {
	ctx := ctxT(t)
	_, err := s.PutSession(ctx, &store.Session{ID: "s1"}, 0)
	require.NoError(t, err)
	const workers, rounds = 12, 15
	revs := make([][]int64, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				rev, err := s.AppendSession(ctx, "s1", []byte(fmt.Sprintf("w%d-r%d\n", w, r)), store.AnyRevision)
				if err != nil {
					errs[w] = err
					return
				}
				revs[w] = append(revs[w], rev)
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for w := range workers {
		require.NoError(t, errs[w])
		for i, rev := range revs[w] {
			assert.False(t, seen[rev], "revision %d was returned twice", rev)
			seen[rev] = true
			if i > 0 {
				assert.Greater(t, rev, revs[w][i-1], "worker %d saw its revisions go back", w)
			}
		}
	}
	got, err := s.GetSession(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, int64(1+workers*rounds), got.Revision)
	lines := strings.Split(strings.TrimSuffix(string(got.Messages), "\n"), "\n")
	assert.Len(t, lines, workers*rounds)
	count := map[string]int{}
	for _, l := range lines {
		count[l]++
	}
	for w := range workers {
		for r := range rounds {
			assert.Equal(t, 1, count[fmt.Sprintf("w%d-r%d", w, r)], "append w%d-r%d", w, r)
		}
	}
}

// testSessionConcurrentCAS increments a counter kept in Messages by
// read, change, write at the revision read, retrying conflicts: no
// increment may be lost.
func testSessionConcurrentCAS(t *testing.T, s store.Sessions) {
	ctx := ctxT(t)
	_, err := s.PutSession(ctx, &store.Session{ID: "s1", Messages: []byte("0")}, 0)
	require.NoError(t, err)
	const workers, rounds = 6, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				for {
					cur, err := s.GetSession(ctx, "s1")
					if err != nil {
						errs <- err
						return
					}
					n, err := strconv.Atoi(string(cur.Messages))
					if err != nil {
						errs <- err
						return
					}
					cur.Messages = []byte(strconv.Itoa(n + 1))
					_, err = s.PutSession(ctx, cur, cur.Revision)
					if errors.Is(err, store.ErrConflict) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got, err := s.GetSession(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(workers*rounds), string(got.Messages))
	assert.Equal(t, int64(1+workers*rounds), got.Revision)
}

func testSessionCancelled(t *testing.T, s store.Sessions) {
	_, err := s.PutSession(ctxT(t), SampleSession("s1"), 0)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.GetSession(ctx, "s1")
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.PutSession(ctx, SampleSession("s1"), store.AnyRevision)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.AppendSession(ctx, "s1", []byte("x"), store.AnyRevision)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, s.DeleteSession(ctx, "s1"), context.Canceled)
	got, err := s.GetSession(ctxT(t), "s1")
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.Revision, "a write with a cancelled context was applied")
}
