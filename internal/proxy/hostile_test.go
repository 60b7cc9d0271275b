package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entering counts the requests that reached the handler.
type entering struct {
	n    atomic.Int64
	next http.Handler
}

func (e *entering) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.n.Add(1)
	e.next.ServeHTTP(w, r)
}

// liar opens a connection to addr and sends the headers of a messages
// request that declares size bytes, then one byte of it, and stalls.
func liar(t *testing.T, addr string, size int) net.Conn {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-Api-Key: %s\r\nContent-Length: %d\r\n\r\n{", addr, testKey, size)
	require.NoError(t, err)
	return c
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func TestLyingConnectionsKeepTheHeapBounded(t *testing.T) {
	const conns, declared = 240, 4 << 20
	r := newRig(t, func(o *Options) { o.MaxBodyBytes = declared })
	e := &entering{next: r.proxy}
	srv := httptest.NewServer(e) // straight to the proxy: the rig's front would read the bodies
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	before := heapInUse()
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for range conns {
		open = append(open, liar(t, addr, declared))
	}
	for deadline := time.Now().Add(time.Minute); e.n.Load() < conns; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "only %d of %d requests reached the proxy", e.n.Load(), conns)
	}
	// The proxy still answers a client that sends its body.
	resp, data := post(t, srv.URL+"/v1/messages", anthropicBody(t, 2, false), map[string]string{"X-Api-Key": testKey})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	assert.Contains(t, string(data), "reply")
	grown := int64(heapInUse()) - int64(before)
	t.Logf("heap grew by %.1f MiB with %d connections each declaring %d MiB", float64(grown)/(1<<20), conns, declared>>20)
	// Each connection costs its buffers and a small body buffer; reserving
	// what was declared would be conns*declared = 960 MiB.
	assert.Less(t, grown, int64(128<<20))
	assert.LessOrEqual(t, metricValue(t, srv.URL, "compact_host_proxy_body_reads_in_progress"), float64(DefaultMaxBodyReads))
	assert.Positive(t, metricValue(t, srv.URL, `compact_host_proxy_requests_total{action="busy"`))
}

// rawResponse reads one HTTP response from c, with a hang guard.
func rawResponse(t *testing.T, c net.Conn) (*http.Response, []byte) {
	require.NoError(t, c.SetReadDeadline(time.Now().Add(waitFor)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "no answer: the stalled body was never cut off")
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

func TestStalledBodyIsCutOff(t *testing.T) {
	r := newRig(t, func(o *Options) { o.BodyIdleTimeout = 200 * time.Millisecond })
	srv := httptest.NewServer(r.proxy)
	defer srv.Close()
	c := liar(t, strings.TrimPrefix(srv.URL, "http://"), 1000)
	defer c.Close()
	resp, data := rawResponse(t, c)
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	var a struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	require.NoError(t, json.Unmarshal(data, &a), "%s", data)
	assert.Equal(t, "error", a.Type, "in the Anthropic error shape")
	assert.Contains(t, a.Error.Message, "did not arrive in time")
	assert.Equal(t, 1.0, metricValue(t, srv.URL, `compact_host_proxy_requests_total{action="body_timeout"`))
	assert.Empty(t, r.up.agentRequests())

	// A body that arrives, even slowly, within the limits goes through.
	body := anthropicBody(t, 1, false)
	c2, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	defer c2.Close()
	fmt.Fprintf(c2, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	half := len(body) / 2
	c2.Write(body[:half])
	time.Sleep(50 * time.Millisecond)
	c2.Write(body[half:])
	resp, data = rawResponse(t, c2)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
}

func TestStreamedAnswerOutlivesTheBodyDeadline(t *testing.T) {
	// The connection's read deadline is lifted once the body is read: an
	// answer that streams longer than the idle timeout is not cut.
	r := newRig(t, func(o *Options) { o.BodyIdleTimeout = 100 * time.Millisecond })
	r.up.hold, r.up.held = make(chan struct{}), make(chan bool, 1)
	req, err := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/messages", bytesReader(anthropicBody(t, 2, true)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "message_start")
	time.Sleep(400 * time.Millisecond) // past the idle timeout, mid-answer
	close(r.up.hold)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.True(t, <-r.up.held)
	assert.Contains(t, string(rest), "message_stop")
}

func TestDotSegmentsAreRefused(t *testing.T) {
	r := newRig(t, nil)
	for _, path := range []string{"/v1/../../admin", "/v1/%2e%2e/%2E%2E/x", "/v1/messages/..%2F..%2Fx", "/v1/./messages", "/v1/.%2e/models"} {
		c, err := net.Dial("tcp", strings.TrimPrefix(r.srv.URL, "http://"))
		require.NoError(t, err)
		body := anthropicBody(t, 1, false)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nX-Api-Key: %s\r\nContent-Length: %d\r\n\r\n%s", path, testKey, len(body), body)
		resp, data := rawResponse(t, c)
		c.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, path)
		var a struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		require.NoError(t, json.Unmarshal(data, &a), "%s: %s", path, data)
		assert.Equal(t, "invalid_request_error", a.Error.Type, path)
		assert.Contains(t, a.Error.Message, "dot segment", path)
	}
	assert.Empty(t, r.up.otherRequests())
	assert.Empty(t, r.up.agentRequests())
}

func TestMetricsToken(t *testing.T) {
	r := newRig(t, func(o *Options) { o.MetricsToken = "metrics-secret-123" })
	get := func(path, auth string) int {
		req, _ := http.NewRequest(http.MethodGet, r.srv.URL+AdminPrefix+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, get("metrics", ""))
	assert.Equal(t, http.StatusUnauthorized, get("metrics", "Bearer metrics-secret-12"))
	assert.Equal(t, http.StatusUnauthorized, get("metrics", "Basic metrics-secret-123"))
	assert.Equal(t, http.StatusOK, get("metrics", "Bearer metrics-secret-123"))
	assert.Equal(t, http.StatusOK, get("healthz", ""), "health checks need no token")

	open := newRig(t, nil)
	resp, err := http.Get(open.srv.URL + AdminPrefix + "metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "no token configured: metrics are open")
}
