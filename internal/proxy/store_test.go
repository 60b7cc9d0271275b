package proxy

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/redisstore"
	"github.com/compact-host/compact-host/host/store/storetest"
	"github.com/compact-host/compact-host/internal/tenant"
)

// countingStrategy writes a summary that depends only on what it folds, and
// counts the summaries paid for.
func countingStrategy(calls *atomic.Int32) host.Option {
	return host.WithStrategy("counting", host.StrategyFunc(func(_ context.Context, _ plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		calls.Add(1)
		return &abi.SummarizeResponse{Summary: fmt.Sprintf("summary of %d messages", len(req.Messages))}, nil
	}))
}

// storeRig is a proxy on st whose summaries are counted in calls.
func storeRig(t *testing.T, st store.Store, calls *atomic.Int32) *rig {
	cfg := smallWindow
	cfg.Strategy, cfg.Fallbacks = "counting", []string{}
	return newRig(t, func(o *Options) {
		o.Store, o.Config, o.Offline = st, cfg, true
		o.EngineOptions = []host.Option{countingStrategy(calls)}
	})
}

// conversation sends turns first..last of one growing conversation, turn i
// to rigs[i % len(rigs)], and returns what reached the upstreams, in order.
func conversation(t *testing.T, first, last int, rigs ...*rig) [][]byte {
	var sent [][]byte
	for n := first; n <= last; n++ {
		r := rigs[n%len(rigs)]
		before := len(r.up.agentRequests())
		resp, _ := post(t, r.srv.URL+"/v1/messages", anthropicBody(t, n, false), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "turn %d", n)
		got := r.up.agentRequests()
		require.Len(t, got, before+1, "turn %d", n)
		sent = append(sent, got[before].Body)
	}
	return sent
}

func TestRestartedProxyReusesItsDiskCompaction(t *testing.T) {
	dir := t.TempDir()
	var calls atomic.Int32
	disk, err := store.OpenDisk(dir, store.DiskOptions{})
	require.NoError(t, err)
	first := storeRig(t, disk, &calls)
	before := conversation(t, 12, 12, first)
	paid := calls.Load() // a cut inside a turn asks for two summaries
	require.Positive(t, paid, "the first proxy compacts")
	require.NotNil(t, checkFaithful(t, anthropicBody(t, 12, false), before[0]))
	require.NoError(t, first.proxy.Close()) // the proxy stops, its store with it

	reopened, err := store.OpenDisk(dir, store.DiskOptions{})
	require.NoError(t, err)
	restarted := storeRig(t, reopened, &calls)
	after := conversation(t, 12, 12, restarted)
	assert.Equal(t, paid, calls.Load(), "the restarted proxy paid for the summary again")
	assert.Equal(t, string(before[0]), string(after[0]), "the restarted proxy sent other bytes")
}

func TestTwoProxiesSharingRedisCompactOnce(t *testing.T) {
	srv := storetest.StartRedis(t)
	open := func() store.Store {
		s, err := redisstore.Open(context.Background(), srv.URL()+"?call_timeout=5s&read_timeout=2s", redisstore.Options{})
		require.NoError(t, err)
		return s
	}
	// What one proxy alone sends is the reference.
	var aloneCalls atomic.Int32
	alone := conversation(t, 10, 17, storeRig(t, store.NewMemory(), &aloneCalls))
	require.Positive(t, aloneCalls.Load(), "the conversation never crossed the threshold")

	var calls atomic.Int32
	a, b := storeRig(t, open(), &calls), storeRig(t, open(), &calls)
	shared := conversation(t, 10, 17, a, b) // round robin
	assert.Equal(t, aloneCalls.Load(), calls.Load(), "two replicas paid for more summaries than one proxy")
	require.Len(t, shared, len(alone))
	for i := range alone {
		assert.Equal(t, string(alone[i]), string(shared[i]), "turn %d differs between one proxy and two replicas", 10+i)
	}
	assert.Zero(t, metricValue(t, a.srv.URL, "compact_host_proxy_store_errors_total"))
}

func TestRedisDownLosesNoRequestAndIsUsedAgainWhenBack(t *testing.T) {
	srv := storetest.StartRedis(t)
	st, err := redisstore.Open(context.Background(), srv.URL()+"?call_timeout=2s", redisstore.Options{})
	require.NoError(t, err)
	var calls atomic.Int32
	r := storeRig(t, st, &calls)
	conversation(t, 12, 12, r)
	require.Positive(t, calls.Load())
	keys, err := srv.Command("DBSIZE")
	require.NoError(t, err)
	require.NotEqual(t, "0", keys, "the compaction was not stored")

	srv.Kill()
	down := conversation(t, 13, 14, r) // forwarded, compacted or not, never lost
	assert.Len(t, down, 2)
	assert.Positive(t, metricValue(t, r.srv.URL, "compact_host_proxy_store_errors_total"))

	srv.Restart() // empty: no persistence
	// While the server is down the client fails fast and probes it about
	// once a second; once a probe succeeds the proxy uses the store again:
	// a turn goes by with no store error and the store holds its record.
	storeErrors := func() float64 { return metricValue(t, r.srv.URL, "compact_host_proxy_store_errors_total") }
	for turn, deadline := 15, time.Now().Add(time.Minute); ; turn++ {
		require.True(t, time.Now().Before(deadline), "the proxy never used the store again once it was back")
		before := storeErrors()
		conversation(t, turn, turn, r)
		keys, err := srv.Command("DBSIZE")
		require.NoError(t, err)
		if storeErrors() == before && keys != "0" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestReplicasShareATenantOnlyWithTheSameSecret(t *testing.T) {
	srv := storetest.StartRedis(t)
	replica := func(keyer *tenant.Keyer, calls *atomic.Int32) *rig {
		st, err := redisstore.Open(context.Background(), srv.URL()+"?call_timeout=5s", redisstore.Options{})
		require.NoError(t, err)
		cfg := smallWindow
		cfg.Strategy, cfg.Fallbacks = "counting", []string{}
		return newRig(t, func(o *Options) {
			o.Store, o.Config, o.Offline, o.TenantKeyer = st, cfg, true, keyer
			o.EngineOptions = []host.Option{countingStrategy(calls)}
		})
	}
	send := func(r *rig, n int, key string) {
		resp, _ := post(t, r.srv.URL+"/v1/messages", convBody(t, n, "Agent of "+key, "x"), map[string]string{"X-Api-Key": key})
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	secret, err := tenant.NewKeyer([]byte("a-shared-tenant-secret-of-32-bytes"))
	require.NoError(t, err)
	var calls atomic.Int32
	a, b := replica(secret, &calls), replica(secret, &calls)
	send(a, 11, "sk-ant-api03-replica-key-1")
	paid := calls.Load()
	require.Positive(t, paid)
	send(b, 12, "sk-ant-api03-replica-key-1")
	assert.Equal(t, paid, calls.Load(), "a replica with the same secret reuses the tenant's compaction")

	var own atomic.Int32
	c := replica(tenant.NewRandomKeyer(), &own) // a secret of its own
	send(c, 12, "sk-ant-api03-replica-key-1")
	assert.Positive(t, own.Load(), "a replica with another secret sees none of the tenant's compactions")
}
