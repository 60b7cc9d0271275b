package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/compact-host/compact-host/host/store"
)

// The proxy's use of a store: one Latest per request; on a miss that
// needs compacting, the conversation's lock around the summary and its Put.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "store-example")
	defer os.RemoveAll(dir)
	s, err := store.OpenDisk(dir, store.DiskOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	_, err = s.Latest(ctx, "conv-1")
	fmt.Println("first request, miss:", errors.Is(err, store.ErrNotFound))

	lock, err := s.Lock(ctx, "conv-1", 30*time.Second)
	if err != nil {
		fmt.Println(err) // ErrLocked: another replica is compacting; forward as is
		return
	}
	_, err = s.Lock(ctx, "conv-1", 30*time.Second)
	fmt.Println("second replica:", errors.Is(err, store.ErrLocked))
	err = s.Put(ctx, &store.Record{
		Key:          "sha256:prefix-and-settings",
		Conversation: "conv-1",
		PrefixHash:   "sha256:first-40-messages",
		FoldedCount:  40,
		Replacement:  []byte(`[{"role":"user","content":"<summary>…</summary>"}]`),
		Strategy:     "structured",
	})
	fmt.Println("put:", err)
	fmt.Println("release:", lock.Release(ctx))

	rec, err := s.Latest(ctx, "conv-1")
	fmt.Println("next request:", rec.FoldedCount, "messages folded into", string(rec.Replacement), err)
	// Output:
	// first request, miss: true
	// second replica: true
	// put: <nil>
	// release: <nil>
	// next request: 40 messages folded into [{"role":"user","content":"<summary>…</summary>"}] <nil>
}
