package server

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two clients that send their bodies a byte at a time hold both workers
// of a server whose bodies are read after a worker is taken. Here bodies
// are read first, under their own deadline: a normal request is answered
// while the two slow ones still trickle, and those get 408 when their
// body deadline passes.
func TestSlowBodiesDoNotHoldWorkers(t *testing.T) {
	s, err := New(Options{Config: testConfig, Registry: registry, Logger: slog.New(slog.DiscardHandler),
		MaxConcurrent: 2, RequestTimeout: 20 * time.Second, BodyTimeout: 3 * time.Second})
	require.NoError(t, err)
	var active atomic.Int32
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateActive {
			active.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	statuses := make(chan string, 2)
	for i := range 2 {
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		_, err = fmt.Fprintf(conn, "POST /v1/truncate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		require.NoError(t, err)
		wg.Add(2)
		go func() { // one byte at a time until stopped, for at most 30 s
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for n := 0; n < 300; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				statuses <- fmt.Sprintf("slow client %d: %v", i, err)
				return
			}
			resp.Body.Close()
			statuses <- resp.Status
		}()
	}
	eventually(t, "both slow clients are connected and sending", func() error {
		if n := active.Load(); n < 2 {
			return fmt.Errorf("%d active", n)
		}
		return nil
	})

	// A normal request is answered while the slow ones trickle.
	r := call(t, ts, "POST", "/v1/truncate", `{"content":"x"}`)
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	// The slow ones are cut at their body deadline, without help.
	for range 2 {
		select {
		case st := <-statuses:
			assert.Equal(t, "408 Request Timeout", st)
		case <-time.After(time.Minute):
			require.FailNow(t, "a slow client got no answer")
		}
	}
	close(stop)
	wg.Wait()
}
