package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// convBody is an Anthropic request of n user turns of one conversation:
// system prompt and first user turn as given, every later turn tagged, so
// two tags share only the conversation's head.
func convBody(t testing.TB, n int, system, tag string) []byte {
	var msgs []map[string]any
	for i := range n {
		text := turnText(i)
		if i > 0 {
			text = tag + " " + text
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": text})
		if i < n-1 {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": []map[string]any{{"type": "text", "text": fmt.Sprintf("reply %d", i+1)}}})
		}
	}
	body, err := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 2000, "system": system, "messages": msgs})
	require.NoError(t, err)
	return body
}

// summariesBy counts the summary calls that carried header h = v.
func summariesBy(u *upstream, h, v string) int {
	n := 0
	for _, s := range u.summaryRequests() {
		if s.Header.Get(h) == v {
			n++
		}
	}
	return n
}

func TestTenantsGetTheirOwnSummaries(t *testing.T) {
	const keyA, keyB = "sk-ant-api03-tenant-A-0001", "sk-ant-api03-tenant-B-0002"
	for _, tc := range []struct {
		name   string
		path   string
		header string
		value  func(key string) string
		body   func(testing.TB, int, bool) []byte
		model  string
	}{
		{"anthropic", "/v1/messages", "X-Api-Key", func(k string) string { return k }, anthropicBody, summaryModel},
		{"openai", "/v1/chat/completions", "Authorization", func(k string) string { return "Bearer " + k }, openAIBody, "gpt-4.1-mini"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, share := range []bool{false, true} {
				r := newRig(t, func(o *Options) { o.CompactionModel, o.ShareCompactions = tc.model, share })
				// A's conversation crosses the threshold and is compacted
				// with A's key.
				resp, _ := post(t, r.srv.URL+tc.path, tc.body(t, 11, false), map[string]string{tc.header: tc.value(keyA)})
				require.Equal(t, http.StatusOK, resp.StatusCode)
				require.Positive(t, summariesBy(r.up, tc.header, tc.value(keyA)), "A's conversation was compacted")
				// B sends A's messages byte for byte and two of its own.
				resp, _ = post(t, r.srv.URL+tc.path, tc.body(t, 12, false), map[string]string{tc.header: tc.value(keyB)})
				require.Equal(t, http.StatusOK, resp.StatusCode)
				got := r.up.agentRequests()
				require.Len(t, got, 2)
				require.NotNil(t, checkFaithful(t, tc.body(t, 12, false), got[1].Body), "B's request was compacted")
				if share {
					assert.Zero(t, summariesBy(r.up, tc.header, tc.value(keyB)), "shared: B reuses A's summary")
					assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="spliced"`))
				} else {
					assert.Positive(t, summariesBy(r.up, tc.header, tc.value(keyB)), "B got a summary made with A's key")
					assert.Zero(t, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="spliced"`))
				}
			}
		})
	}
}

func TestAnonymousIsItsOwnTenant(t *testing.T) {
	r := newRig(t, nil)
	resp, _ := post(t, r.srv.URL+"/v1/messages", anthropicBody(t, 11, false), map[string]string{"X-Api-Key": testKey})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	keyed := len(r.up.summaryRequests())
	require.Positive(t, keyed)
	resp, _ = post(t, r.srv.URL+"/v1/messages", anthropicBody(t, 12, false), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Greater(t, len(r.up.summaryRequests()), keyed, "a request with no credential got a keyed tenant's summary")
	assert.Zero(t, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="spliced"`))
}

// lockLog is a memory store that records the names its locks are taken
// under, and reports the first lock it finds taken.
type lockLog struct {
	*store.Memory
	mu      sync.Mutex
	names   []string
	locked  chan struct{}
	onceHit sync.Once
}

func newLockLog() *lockLog { return &lockLog{Memory: store.NewMemory(), locked: make(chan struct{})} }

func (l *lockLog) Lock(ctx context.Context, name string, lease time.Duration) (store.Lock, error) {
	lk, err := l.Memory.Lock(ctx, name, lease)
	l.mu.Lock()
	l.names = append(l.names, name)
	l.mu.Unlock()
	if err != nil {
		l.onceHit.Do(func() { close(l.locked) })
	}
	return lk, err
}

func (l *lockLog) lockNames() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names...)
}

// blockingFirst is a strategy whose first call waits for release; later
// calls answer at once.
func blockingFirst(entered, release chan struct{}) host.Option {
	var calls atomic.Int32
	return host.WithStrategy("blocking", host.StrategyFunc(func(ctx context.Context, _ plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		if calls.Add(1) == 1 {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &abi.SummarizeResponse{Summary: fmt.Sprintf("summary of %d messages", len(req.Messages))}, nil
	}))
}

// slowRig is a proxy whose first summary blocks until release.
func slowRig(t *testing.T, st store.Store, share bool) (r *rig, entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	cfg := smallWindow
	cfg.Strategy, cfg.Fallbacks = "blocking", []string{}
	r = newRig(t, func(o *Options) {
		o.Store, o.Config, o.Offline, o.ShareCompactions = st, cfg, true, share
		o.EngineOptions = []host.Option{blockingFirst(entered, release)}
		o.LockWait = 5 * time.Minute
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return r, entered, release
}

// postAsync sends body and delivers the status when the answer is whole.
func postAsync(r *rig, body []byte, header map[string]string) <-chan int {
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/messages", bytesReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// waitFor is what a test waits for a request that must not be stalled;
// a hang guard, not a timing assertion.
const waitFor = 2 * time.Minute

func TestSlowCompactionStallsNoStranger(t *testing.T) {
	t.Run("other tenant, same conversation", func(t *testing.T) {
		st := newLockLog()
		r, entered, release := slowRig(t, st, false)
		body := anthropicBody(t, 12, false)
		a := postAsync(r, body, map[string]string{"X-Api-Key": "sk-ant-api03-slow-tenant-A"})
		<-entered // A is summarizing, its lock held
		select {
		case status := <-postAsync(r, body, map[string]string{"X-Api-Key": "sk-ant-api03-other-tenant-B"}):
			assert.Equal(t, http.StatusOK, status)
		case <-time.After(waitFor):
			t.Fatal("B waited for A's compaction")
		}
		close(release)
		assert.Equal(t, http.StatusOK, <-a)
		names := st.lockNames()
		require.Len(t, names, 2)
		assert.NotEqual(t, names[0], names[1], "two tenants took one lock")
	})
	t.Run("same tenant, shared head only", func(t *testing.T) {
		r, entered, release := slowRig(t, newLockLog(), false)
		key := map[string]string{"X-Api-Key": testKey}
		a := postAsync(r, convBody(t, 12, "You are a careful coding agent.", "[A]"), key)
		<-entered
		select {
		case status := <-postAsync(r, convBody(t, 12, "You are a careful coding agent.", "[B]"), key):
			assert.Equal(t, http.StatusOK, status)
		case <-time.After(waitFor):
			t.Fatal("a conversation sharing only the head waited for the other's compaction")
		}
		close(release)
		assert.Equal(t, http.StatusOK, <-a)
		assert.Equal(t, 2.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="compacted"`))
	})
	t.Run("shared compactions share the lock", func(t *testing.T) {
		st := newLockLog()
		r, entered, release := slowRig(t, st, true)
		body := anthropicBody(t, 12, false)
		a := postAsync(r, body, map[string]string{"X-Api-Key": "sk-ant-api03-slow-tenant-A"})
		<-entered
		b := postAsync(r, body, map[string]string{"X-Api-Key": "sk-ant-api03-other-tenant-B"})
		select {
		case <-st.locked: // B found A's lock
		case <-time.After(waitFor):
			t.Fatal("B never met A's lock")
		}
		close(release)
		assert.Equal(t, http.StatusOK, <-a)
		assert.Equal(t, http.StatusOK, <-b)
		assert.Equal(t, 1.0, metricValue(t, r.srv.URL, "compact_host_proxy_compactions_total"), "one summary for both")
	})
}

func TestLockWaitEndsAtTheRequestsLimit(t *testing.T) {
	r, entered, release := slowRig(t, newLockLog(), false)
	r.proxy.o.LockWait = 300 * time.Millisecond
	body := anthropicBody(t, 12, false)
	a := postAsync(r, body, nil)
	<-entered
	// The same prefix again: it waits at most LockWait, then goes on
	// uncompacted, while A still holds the lock.
	select {
	case status := <-postAsync(r, body, nil):
		assert.Equal(t, http.StatusOK, status)
	case <-time.After(waitFor):
		t.Fatal("the second request waited past --lock-wait")
	}
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, "compact_host_proxy_lock_wait_timeouts_total"))
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_fallbacks_total{reason="lock wait"`))
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	assert.Equal(t, string(body), string(got[0].Body), "forwarded as it came")
	close(release)
	assert.Equal(t, http.StatusOK, <-a)
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
