package recallmcp_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/recall"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/mcptest"
	"github.com/compact-host/compact-host/internal/recallmcp"
	"github.com/compact-host/compact-host/internal/recallstore"
)

// kept stores msgs as the proxy keeps a compaction that folded them all,
// for tenant, and returns the conversation ID.
func kept(t testing.TB, ss store.Sessions, tenant string, msgs []abi.Message, key recall.Key) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + msgs[0].Text()))
	conv := hex.EncodeToString(sum[:])
	w := recallstore.Write{Tenant: tenant, Conversation: conv, Keys: []recall.Key{key}, Messages: msgs, Through: len(msgs)}
	for i := range msgs {
		w.Positions = append(w.Positions, i)
	}
	_, err := recallstore.Keep(context.Background(), ss, w)
	require.NoError(t, err)
	return conv
}

// A tenant's source finds each marker in its own conversation, and
// nothing of another tenant's, even named by its conversation ID.
func TestStoreSourceKeepsTenantsApart(t *testing.T) {
	ctx := context.Background()
	disk, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
	require.NoError(t, err)
	defer disk.Close()
	a1, ka1 := conversation("a-first", 10)
	a2, ka2 := conversation("a-second", 10)
	b1, kb1 := conversation("b-first", 10)
	kept(t, disk, "tenant-a", a1, ka1)
	kept(t, disk, "tenant-a", a2, ka2)
	convB := kept(t, disk, "tenant-b", b1, kb1)

	srv := recallmcp.NewServer(&recallmcp.StoreSource{Sessions: disk, Tenant: "tenant-a"}, "test")
	cs := connect(t, srv)
	for opening, key := range map[string]recall.Key{"a-first": ka1, "a-second": ka2} {
		text, isErr := mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": key.ToolRef("call_2")})
		require.False(t, isErr, text)
		assert.Contains(t, text, "secret-"+opening+"-2\n")
	}
	text, isErr := mcptest.Call(t, cs, recallmcp.ToolSearch, map[string]any{"query": "secret-a-", "limit": 30})
	require.False(t, isErr, text)
	assert.Contains(t, text, "secret-a-first", "search covers the tenant's conversations")
	assert.Contains(t, text, "secret-a-second")
	for _, ref := range []string{kb1.ToolRef("call_2"), kb1.SpanRef("a1", "r3"), "t-../../../etc/passwd", "s-" + strings.Repeat("0", 5000)} {
		text, isErr := mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": ref})
		assert.True(t, isErr, ref)
		assert.NotContains(t, text, "secret-")
	}
	text, isErr = mcptest.Call(t, cs, recallmcp.ToolSearch, map[string]any{"query": "secret-b"})
	require.False(t, isErr, text)
	assert.Equal(t, "no match", text)

	// Tenant a naming tenant b's conversation reads as if it were not there.
	foreign := &recallmcp.StoreSource{Sessions: disk, Tenant: "tenant-a", Conversation: convB}
	_, err = foreign.Index(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no originals are kept")
	_, err = foreign.IndexFor(ctx, kb1.ToolRef("call_2"))
	require.Error(t, err)
	// A tenant with nothing kept.
	_, err = (&recallmcp.StoreSource{Sessions: disk, Tenant: "tenant-c"}).Index(ctx)
	assert.ErrorContains(t, err, "no originals are kept for this credential")
}

// A huge original comes in pages and stops at the page cap; concurrent
// calls each get their own answer; what a later compaction keeps is found
// once the index is read again.
func TestStoreSourceUnderLoad(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	msgs, key := conversation("load", 40)
	msgs[10].Content[0].Text = strings.Repeat("h", recall.PageBytes*(recall.MaxPages+3))
	src := &recallmcp.StoreSource{Sessions: st, Tenant: "t", MaxAge: time.Nanosecond}
	kept(t, st, "t", msgs[:21], key)
	cs := connect(t, recallmcp.NewServer(src, "test"))

	bigRef := key.ToolRef("call_4") // msgs[10] is call_4's result
	text, isErr := mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": bigRef})
	require.False(t, isErr, text)
	assert.LessOrEqual(t, len(text), recall.PageBytes+512)
	assert.Contains(t, text, fmt.Sprintf("of %d,", recall.MaxPages))
	text, isErr = mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": bigRef, "page": recall.MaxPages + 1})
	assert.True(t, isErr, text)

	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			n := i % 10
			if n == 4 {
				n = 5
			}
			text, isErr := callNoT(cs, recallmcp.ToolRecall, map[string]any{"ref": key.ToolRef(fmt.Sprintf("call_%d", n))})
			assert.False(t, isErr, text)
			assert.Contains(t, text, fmt.Sprintf("secret-load-%d\n", n))
		})
	}
	wg.Wait()

	later := key.ToolRef("call_30")
	text, isErr = mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": later})
	assert.True(t, isErr, "not kept yet: %s", text)
	w := recallstore.Write{Tenant: "t", Keys: []recall.Key{key}, Messages: msgs, Through: len(msgs)}
	w.Conversation = kept(t, store.NewMemory(), "t", msgs[:21], key) // the same ID
	for i := range msgs {
		w.Positions = append(w.Positions, i)
	}
	_, err := recallstore.Keep(ctx, st, w)
	require.NoError(t, err)
	text, isErr = mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": later})
	require.False(t, isErr, text)
	assert.Contains(t, text, "secret-load-30\n")
}

// BenchmarkRecallFromDiskStore is one recall call's work behind the
// server on the originals of a 2,000-turn conversation the proxy kept in
// the disk store: "warm" answers from the index read last (within
// MaxAge), "read" reads the originals from disk and indexes them anew
// (the first call, or one a minute later).
func BenchmarkRecallFromDiskStore(b *testing.B) {
	disk, err := store.OpenDisk(b.TempDir(), store.DiskOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer disk.Close()
	ctx := context.Background()
	for _, bc := range []struct {
		name  string
		turns int
		age   time.Duration
	}{{"warm/turns=2000", 2000, 0}, {"read/turns=200", 200, time.Nanosecond}, {"read/turns=2000", 2000, time.Nanosecond}} {
		msgs, key := conversation(fmt.Sprint("bench", bc.turns), bc.turns)
		conv := kept(b, disk, "t", msgs, key)
		ref := key.ToolRef(fmt.Sprintf("call_%d", bc.turns/2))
		b.Run(bc.name, func(b *testing.B) {
			src := &recallmcp.StoreSource{Sessions: disk, Conversation: conv, MaxAge: bc.age}
			for b.Loop() {
				x, err := src.IndexFor(ctx, ref)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := x.Recall(ref, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// connect runs srv on an in-memory transport and connects a client.
func connect(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callNoT is call for a goroutine: errors are part of the answer.
func callNoT(cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), mcptest.CallTimeout)
	defer cancel()
	text, isErr, err := mcptest.CallTool(ctx, cs, tool, args)
	if err != nil {
		return err.Error(), true
	}
	return text, isErr
}

// The indexes read stay within the cache's bound, the oldest leaving
// first; a cache shared by tenants serves each only its own.
func TestIndexCacheIsBoundedAndKeepsTenantsApart(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	m1, k1 := conversation("cache-one", 20)
	m2, k2 := conversation("cache-two", 20)
	c1, c2 := kept(t, st, "a", m1, k1), kept(t, st, "a", m2, k2)
	o, err := recallstore.Load(ctx, st, c1)
	require.NoError(t, err)

	for _, tc := range []struct {
		name    string
		bytes   int64
		evicted bool
	}{{"one fits", o.Bytes * 3 / 2, true}, {"both fit", o.Bytes * 3, false}} {
		t.Run(tc.name, func(t *testing.T) {
			st := store.NewMemory()
			conv1, conv2 := kept(t, st, "a", m1, k1), kept(t, st, "a", m2, k2)
			require.Equal(t, []string{c1, c2}, []string{conv1, conv2})
			cache := &recallmcp.IndexCache{MaxBytes: tc.bytes}
			src := &recallmcp.StoreSource{Sessions: st, Tenant: "a", Cache: cache}
			_, err := src.IndexFor(ctx, k1.ToolRef("call_1"))
			require.NoError(t, err)
			_, err = src.IndexFor(ctx, k2.ToolRef("call_1"))
			require.NoError(t, err)
			// Gone from the store: only a cached index still answers.
			require.NoError(t, st.DeleteSession(ctx, "recall/"+conv1))
			x, err := (&recallmcp.StoreSource{Sessions: st, Conversation: conv1, Tenant: "a", Cache: cache}).Index(ctx)
			if tc.evicted {
				assert.Error(t, err, "the first index left the cache when the second came")
			} else {
				require.NoError(t, err)
				_, err = x.Recall(k1.ToolRef("call_1"), 1)
				assert.NoError(t, err)
			}
			// Another tenant, on the same cache, gets nothing of a's.
			_, err = (&recallmcp.StoreSource{Sessions: st, Conversation: conv2, Tenant: "b", Cache: cache}).Index(ctx)
			assert.ErrorContains(t, err, "no originals are kept")
		})
	}
}

// counting counts the reads of each session.
type counting struct {
	store.Sessions
	mu    sync.Mutex
	reads map[string]int
}

func (c *counting) GetSession(ctx context.Context, id string) (*store.Session, error) {
	c.mu.Lock()
	c.reads[id]++
	c.mu.Unlock()
	return c.Sessions.GetSession(ctx, id)
}

func (c *counting) n(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[id]
}

// Unknown markers cost reads of the tenant's list, never of a
// conversation that did not grow; a conversation that grew is read again
// and its new markers found.
func TestStoreSourceRereadsOnlyWhatGrew(t *testing.T) {
	ctx := context.Background()
	mem := store.NewMemory()
	m1, k1 := conversation("grow-one", 30)
	m2, k2 := conversation("grow-two", 30)
	c1 := kept(t, mem, "a", m1[:21], k1)
	c2 := kept(t, mem, "a", m2, k2)
	st := &counting{Sessions: mem, reads: map[string]int{}}
	src := &recallmcp.StoreSource{Sessions: st, Tenant: "a", MinReload: time.Nanosecond}
	for _, ref := range []string{k1.ToolRef("call_3"), k2.ToolRef("call_3")} {
		x, err := src.IndexFor(ctx, ref)
		require.NoError(t, err)
		_, err = x.Recall(ref, 1)
		require.NoError(t, err)
	}
	require.Equal(t, 1, st.n("recall/"+c1))
	require.Equal(t, 1, st.n("recall/"+c2))

	lists := st.n("recall-tenant/a")
	for range 10 {
		x, err := src.IndexFor(ctx, "t-00000000000000aa")
		if err == nil {
			_, err = x.Recall("t-00000000000000aa", 1)
		}
		require.ErrorIs(t, err, recall.ErrUnknownRef)
	}
	assert.Equal(t, 1, st.n("recall/"+c1), "unknown markers reread a conversation that did not grow")
	assert.Equal(t, 1, st.n("recall/"+c2))
	assert.Equal(t, lists+10, st.n("recall-tenant/a"), "one list read per unknown marker past MinReload")

	w := recallstore.Write{Tenant: "a", Conversation: c1, Keys: []recall.Key{k1}, Messages: m1, Through: len(m1)}
	for i := range m1 {
		w.Positions = append(w.Positions, i)
	}
	_, err := recallstore.Keep(ctx, mem, w)
	require.NoError(t, err)
	later := k1.ToolRef("call_25")
	x, err := src.IndexFor(ctx, later)
	require.NoError(t, err)
	p, err := x.Recall(later, 1)
	require.NoError(t, err)
	assert.Contains(t, p.Text, "secret-grow-one-25\n")
	assert.Equal(t, 2, st.n("recall/"+c1), "the conversation that grew is read again")
	assert.Equal(t, 1, st.n("recall/"+c2), "the other is not")
}
