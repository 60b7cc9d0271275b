package recallstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/recall"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/redisstore"
	"github.com/compact-host/compact-host/host/store/storetest"
	"github.com/compact-host/compact-host/internal/recallstore"
)

const conv = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// history is n messages, message i of size bytes.
func history(n, size int) []abi.Message {
	var msgs []abi.Message
	for i := range n {
		role := abi.RoleUser
		if i%2 == 1 {
			role = abi.RoleAssistant
		}
		text := fmt.Sprintf("message %d ", i) + strings.Repeat("z", size)
		msgs = append(msgs, abi.Message{ID: fmt.Sprintf("anthropic-%d", i), Role: role, Content: []abi.Block{{Type: abi.BlockText, Text: text}}})
	}
	return msgs
}

// write is what a compaction folding msgs[:through] hands Keep.
func write(tenant string, msgs []abi.Message, through int) recallstore.Write {
	key, _ := recall.KeyFor(msgs)
	w := recallstore.Write{Tenant: tenant, Conversation: conv, Keys: []recall.Key{key}, Through: through}
	for i := range msgs[:through] {
		w.Messages = append(w.Messages, msgs[i])
		w.Positions = append(w.Positions, i)
	}
	return w
}

func TestKeepAddsOnlyWhatIsNew(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	msgs := history(30, 100)
	n, err := recallstore.Keep(ctx, st, write("t1", msgs, 10))
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	n, err = recallstore.Keep(ctx, st, write("t1", msgs, 25))
	require.NoError(t, err)
	assert.Equal(t, 15, n, "only messages 10 to 24 are new")
	n, err = recallstore.Keep(ctx, st, write("t1", msgs, 20))
	require.NoError(t, err)
	assert.Zero(t, n, "an older compaction adds nothing")

	o, err := recallstore.Load(ctx, st, conv)
	require.NoError(t, err)
	require.Len(t, o.Messages, 25)
	for i, m := range o.Messages {
		assert.Equal(t, msgs[i].ID, m.ID)
	}
	key, _ := recall.KeyFor(msgs)
	p, err := o.Index().Recall(key.SpanRef("anthropic-3", "anthropic-12"), 1)
	require.NoError(t, err)
	assert.Contains(t, p.Text, "message 12 ")

	_, err = recallstore.Keep(ctx, st, write("t2", msgs, 29))
	require.Error(t, err, "another tenant cannot write this conversation")
	o, err = recallstore.Load(ctx, st, conv)
	require.NoError(t, err)
	assert.Len(t, o.Messages, 25, "and changed nothing")
	convs, err := recallstore.Conversations(ctx, st, "t2")
	require.NoError(t, err)
	assert.Empty(t, convs)
}

func TestKeepStopsAtTheStoreSizeLimit(t *testing.T) {
	ctx := context.Background()
	disk, err := store.OpenDisk(t.TempDir(), store.DiskOptions{MaxSessionBytes: 64 << 10})
	require.NoError(t, err)
	defer disk.Close()
	msgs := history(100, 1000)
	_, err = recallstore.Keep(ctx, disk, write("t", msgs, 40))
	require.NoError(t, err)
	_, err = recallstore.Keep(ctx, disk, write("t", msgs, 90))
	require.ErrorIs(t, err, store.ErrSessionTooLarge)
	o, err := recallstore.Load(ctx, disk, conv)
	require.NoError(t, err)
	assert.Len(t, o.Messages, 40, "what was kept stays")
}

func TestConcurrentKeepsKeepEachMessageOnce(t *testing.T) {
	ctx := context.Background()
	disk, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
	require.NoError(t, err)
	defer disk.Close()
	msgs := history(64, 200)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := recallstore.Keep(ctx, disk, write("t", msgs, 8*(i+1))); err != nil {
				assert.ErrorIs(t, err, store.ErrConflict, "only a lost race may fail")
			}
		})
	}
	wg.Wait()
	o, err := recallstore.Load(ctx, disk, conv)
	require.NoError(t, err)
	for i, m := range o.Messages {
		require.Equal(t, fmt.Sprintf("anthropic-%d", i), m.ID, "in order, each once")
	}
	assert.NotEmpty(t, o.Messages)
}

func TestTenantListIsBoundedNewestFirst(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	msgs := history(4, 10)
	var ids []string
	for i := range recallstore.MaxTenantConversations + 5 {
		w := write("t", msgs, 4)
		w.Conversation = fmt.Sprintf("%064x", i+1)
		ids = append(ids, w.Conversation)
		_, err := recallstore.Keep(ctx, st, w)
		require.NoError(t, err)
	}
	convs, err := recallstore.Conversations(ctx, st, "t")
	require.NoError(t, err)
	require.Len(t, convs, recallstore.MaxTenantConversations)
	assert.Equal(t, ids[len(ids)-1], convs[0])
}

func TestConversationIDsAreChecked(t *testing.T) {
	for _, bad := range []string{"", "../" + conv[3:], strings.ToUpper(conv), conv + "0", "recall-tenant/t"} {
		assert.ErrorIs(t, recallstore.CheckConversation(bad), recallstore.ErrBadConversation, bad)
		_, err := recallstore.Load(context.Background(), store.NewMemory(), bad)
		assert.ErrorIs(t, err, recallstore.ErrBadConversation)
	}
}

// On Redis the originals expire with the store's TTL.
func TestOriginalsExpireWithRedis(t *testing.T) {
	srv := storetest.StartRedis(t)
	ctx := context.Background()
	st, err := redisstore.Open(ctx, srv.URL()+"?call_timeout=5s", redisstore.Options{TTL: 200 * time.Millisecond})
	require.NoError(t, err)
	defer st.Close()
	_, err = recallstore.Keep(ctx, st, write("t", history(10, 50), 6))
	require.NoError(t, err)
	o, err := recallstore.Load(ctx, st, conv)
	require.NoError(t, err)
	assert.Len(t, o.Messages, 6)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = recallstore.Load(ctx, st, conv)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		require.True(t, time.Now().Before(deadline), "originals with a 200ms TTL outlived 10s")
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkKeepOnDisk is what a compaction adds to the proxy's request:
// keeping 20 more folded messages of a conversation whose originals hold
// 4,000 messages of about 1 KB already, in the disk store.
func BenchmarkKeepOnDisk(b *testing.B) {
	ctx := context.Background()
	disk, err := store.OpenDisk(b.TempDir(), store.DiskOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer disk.Close()
	msgs := history(4000+20*b.N+20, 1000)
	if _, err := recallstore.Keep(ctx, disk, write("t", msgs, 4000)); err != nil {
		b.Fatal(err)
	}
	through := 4000
	b.ResetTimer()
	for range b.N {
		through += 20
		w := write("t", msgs, through)
		w.Messages, w.Positions = w.Messages[through-20:], w.Positions[through-20:]
		if _, err := recallstore.Keep(ctx, disk, w); err != nil {
			b.Fatal(err)
		}
	}
}
