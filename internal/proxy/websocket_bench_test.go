package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/compact-host/compact-host/host"
	"github.com/stretchr/testify/require"
)

// BenchmarkWebSocketRelay times one response.create of a 200k-token
// Codex conversation, from the client's write to the upstream's answer
// back at the client, straight to the upstream and through the relay:
// the difference of the p50s is what the relay adds.
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
	for _, tc := range []struct{ name, base string }{{"direct", up.URL}, {"relay", front.URL}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(tc.base, "http")+"/v1/responses", nil)
			require.NoError(b, err)
			defer c.CloseNow()
			c.SetReadLimit(-1)
			b.SetBytes(int64(len(create)))
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				require.NoError(b, c.Write(ctx, websocket.MessageText, create))
				_, _, err := c.Read(ctx)
				require.NoError(b, err)
				samples = append(samples, time.Since(start))
			}
			b.StopTimer()
			reportPercentiles(b, samples)
		})
	}
}
