package provider_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// fakeAPI is a loopback server that answers each request with the next
// scripted reply (the last one repeats) and records what it received.
type fakeAPI struct {
	*httptest.Server
	mu       sync.Mutex
	replies  []http.HandlerFunc
	received []received
	// arrived gets a value as each request arrives, if set.
	arrived chan struct{}
}

type received struct {
	path   string
	header http.Header
	body   map[string]any
}

func newFakeAPI(t *testing.T, replies ...http.HandlerFunc) *fakeAPI {
	t.Helper()
	f := &fakeAPI{replies: replies}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	n := len(f.received)
	f.received = append(f.received, received{path: r.URL.Path, header: r.Header.Clone(), body: body})
	reply := f.replies[min(n, len(f.replies)-1)]
	f.mu.Unlock()
	if f.arrived != nil {
		f.arrived <- struct{}{}
	}
	reply(w, r)
}

func (f *fakeAPI) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.received...)
}

// reply writes status, JSON body and optional header pairs.
func reply(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		if body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// stall never answers: it waits until the client goes away.
func stall(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// stallAfterHeaders sends a 200 and the start of a body, then waits until
// the client goes away.
func stallAfterHeaders(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, `{"id":"msg_01","type":"message",`)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// hangUp closes the connection without a response.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// redirectTo returns an HTTP client that sends every request to target,
// whatever its host: a way to test the default (public) base URLs.
func redirectTo(t *testing.T, target string) *http.Client {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, u.Host
		return http.DefaultTransport.RoundTrip(r)
	})}
}
