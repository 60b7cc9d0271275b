package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/stretchr/testify/require"
)

// BenchRecords is how many records a benchmark's store holds, so that a
// store whose cost grows with its size shows it.
const BenchRecords = 1000

// benchRecord is a record of a realistic size: an 8 KiB replacement.
func benchRecord(i int) *store.Record {
	rec := Sample(fmt.Sprintf("bench-key-%d", i), fmt.Sprintf("bench-conv-%d", i%100))
	rec.Replacement = bytes.Repeat([]byte("summary "), 1<<10)
	return rec
}

// Preload fills s with BenchRecords records over 100 conversations.
func Preload(b *testing.B, s store.Store) {
	for i := range BenchRecords {
		require.NoError(b, s.Put(context.Background(), benchRecord(i)))
	}
}

// BenchmarkLatestHit measures what the proxy pays on every request: one
// Latest that finds the conversation's record, in a store of 1000.
func BenchmarkLatestHit(b *testing.B, s store.Store) {
	Preload(b, s)
	LoopLatestHit(b, s)
}

// LoopLatestHit is BenchmarkLatestHit's timed part, for a caller that
// reads its own counters around it.
func LoopLatestHit(b *testing.B, s store.Store) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Latest(ctx, fmt.Sprintf("bench-conv-%d", i%100)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPut measures what a compaction pays to store its result, in a
// store that keeps 1000 records (each Put replaces one of them).
func BenchmarkPut(b *testing.B, s store.Store) {
	Preload(b, s)
	LoopPut(b, s)
}

// LoopPut is BenchmarkPut's timed part.
func LoopPut(b *testing.B, s store.Store) {
	ctx := context.Background()
	recs := make([]*store.Record, BenchRecords)
	for i := range recs {
		recs[i] = benchRecord(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := s.Put(ctx, recs[i%BenchRecords]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchSessions is how many sessions the session benchmarks spread their
// appends over.
const BenchSessions = 100

// PreloadSessions creates BenchSessions sessions of an 8 KiB log each.
func PreloadSessions(b *testing.B, s store.Sessions) {
	for i := range BenchSessions {
		sess := &store.Session{ID: fmt.Sprintf("bench-session-%d", i), Messages: bytes.Repeat([]byte("log line\n"), 910),
			Settings: []byte(`{"options":{}}`)}
		_, err := s.PutSession(context.Background(), sess, store.AnyRevision)
		require.NoError(b, err)
	}
}

// benchLine is one appended message of a session log, about 256 bytes.
var benchLine = append([]byte(`{"type":"message","message":{"role":"user","content":[{"type":"text","text":"`), append(bytes.Repeat([]byte("x"), 180), `"}]}}`+"\n"...)...)

// LoopSessionAppend measures AppendSession alone: one message added to
// one of BenchSessions sessions.
func LoopSessionAppend(b *testing.B, s store.Sessions) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := s.AppendSession(ctx, fmt.Sprintf("bench-session-%d", i%BenchSessions), benchLine, store.AnyRevision); err != nil {
			b.Fatal(err)
		}
	}
}

// LoopSessionUpdate measures what the service asks of its store for an
// append that does not compact: take the session's lock, read it, append
// at the revision read, release the lock.
func LoopSessionUpdate(b *testing.B, st store.Store) {
	s := st.(store.Sessions)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("bench-session-%d", i%BenchSessions)
		l, err := st.Lock(ctx, "session:"+id, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		cur, err := s.GetSession(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.AppendSession(ctx, id, benchLine, cur.Revision); err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionAppend runs LoopSessionAppend on preloaded sessions.
func BenchmarkSessionAppend(b *testing.B, s store.Sessions) {
	PreloadSessions(b, s)
	LoopSessionAppend(b, s)
}

// BenchmarkSessionUpdate runs LoopSessionUpdate on preloaded sessions.
func BenchmarkSessionUpdate(b *testing.B, st store.Store) {
	PreloadSessions(b, st.(store.Sessions))
	LoopSessionUpdate(b, st)
}
