package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/compact-host/compact-host/host"
	"github.com/stretchr/testify/require"
)

// BenchmarkWebSocketRelay times one response.create of a 200k-token
// Codex conversation, from the client's write to the upstream's answer
// back at the client, straight to the upstream and through the relay, in
// turn: added-p50-ms is the median of the differences, what the relay
// adds (its gate and the second hop).
func BenchmarkWebSocketRelay(b *testing.B) {
	body := bigResponses(b, 200_000)
	create := append([]byte(`{"type":"response.create",`), body[1:]...)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(-1)
		for {
			if _, _, err := c.Read(r.Context()); err != nil {
				return
			}
			if c.Write(r.Context(), websocket.MessageText, []byte(`{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[]}}`)) != nil {
				return
			}
		}
	}))
	b.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	p, err := New(Options{Upstream: u, Config: host.Config{ContextWindow: 1_000_000}, Registry: registry, Offline: true,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(b, err)
	b.Cleanup(func() { p.Close() })
	front := httptest.NewServer(p)
	b.Cleanup(front.Close)
	ctx := context.Background()
	dial := func(base string) *websocket.Conn {
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/responses", nil)
		require.NoError(b, err)
		b.Cleanup(func() { c.CloseNow() })
		c.SetReadLimit(-1)
		return c
	}
	direct, relayed := dial(up.URL), dial(front.URL)
	roundTrip := func(c *websocket.Conn) time.Duration {
		start := time.Now()
		require.NoError(b, c.Write(ctx, websocket.MessageText, create))
		_, _, err := c.Read(ctx)
		require.NoError(b, err)
		return time.Since(start)
	}
	// Each iteration times both, in turn, so that both see the same load.
	b.SetBytes(int64(len(create)))
	var straight, through, added []time.Duration
	b.ResetTimer()
	for i := range b.N {
		var d, r time.Duration
		if i%2 == 0 {
			d, r = roundTrip(direct), roundTrip(relayed)
		} else {
			r, d = roundTrip(relayed), roundTrip(direct)
		}
		straight, through, added = append(straight, d), append(through, r), append(added, r-d)
	}
	b.StopTimer()
	p50 := func(s []time.Duration) float64 {
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(straight), "direct-p50-ms")
	b.ReportMetric(p50(through), "relay-p50-ms")
	b.ReportMetric(p50(added), "added-p50-ms")
}
