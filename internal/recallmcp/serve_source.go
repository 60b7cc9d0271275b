package recallmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/recall"
)

// MaxServeBytes bounds the answer a ServeSource reads: the originals of
// a session and its context, each within the store's limit of a session
// (16 MiB by default), as JSON.
const MaxServeBytes = 256 << 20

// ServeTimeout bounds one read of a session from serve.
const ServeTimeout = 30 * time.Second

// ServeSource is a session kept by `compact-host serve`, read over its
// API (GET /v1/sessions/{id}/originals) with the session's token, so
// that the tenant scoping of serve applies: a token reaches its own
// sessions only. It is read again when the session changed (serve
// answers 304 while it has not).
type ServeSource struct {
	// URL is serve's base URL, e.g. http://127.0.0.1:8377.
	URL string
	// Session is the session's ID, as the client made it.
	Session string
	// Token is the bearer token the session was made with, if serve
	// requires one.
	Token string
	// Client makes the requests; http.DefaultClient when nil. Every
	// read is bounded by ServeTimeout besides.
	Client *http.Client
	// MaxBytes bounds the answer; MaxServeBytes when 0.
	MaxBytes int64

	mu    sync.Mutex
	etag  string
	index *recall.Index
}

// Index reads the session if it changed since the last call.
func (s *ServeSource) Index(ctx context.Context) (*recall.Index, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, ServeTimeout)
	defer cancel()
	u, err := url.Parse(strings.TrimRight(s.URL, "/") + "/v1/sessions/" + url.PathEscape(s.Session) + "/originals")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, errors.New("the serve URL is not an http or https URL; the server's operator should check --serve-url")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	if s.index != nil {
		req.Header.Set("If-None-Match", s.etag)
	}
	hc := s.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("compact-host serve did not answer within %v; retry later", ServeTimeout)
		}
		return nil, errors.New("compact-host serve cannot be reached; the server's operator should check --serve-url")
	}
	defer resp.Body.Close()
	limit := s.MaxBytes
	if limit <= 0 {
		limit = MaxServeBytes
	}
	switch resp.StatusCode {
	case http.StatusNotModified:
		if s.index != nil {
			return s.index, nil
		}
	case http.StatusOK:
		data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return nil, errors.New("the session's originals did not arrive whole from compact-host serve; retry")
		}
		if int64(len(data)) > limit {
			return nil, fmt.Errorf("the session's originals are over the limit of %d bytes", limit)
		}
		x, err := indexOriginals(data)
		if err != nil {
			return nil, err
		}
		s.index, s.etag = x, resp.Header.Get("ETag")
		return x, nil
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, errors.New("compact-host serve refused the token; the server's operator should check --serve-token-env")
	case http.StatusNotFound:
		// serve answers a session of another token as one never made.
		return nil, fmt.Errorf("compact-host serve has no session %q for this token", s.Session)
	}
	return nil, fmt.Errorf("compact-host serve answered %s: %s", resp.Status, serveMessage(resp.Body))
}

// indexOriginals indexes serve's answer: the session's originals, keyed
// by its first message and by each summary in it.
func indexOriginals(data []byte) (*recall.Index, error) {
	var body struct {
		Messages []abi.Message `json:"messages"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, errors.New("compact-host serve's answer does not read as a session's originals")
	}
	keys := recall.KeysFor(body.Messages)
	if len(keys) == 0 {
		return nil, ErrNoConversation
	}
	return recall.New(body.Messages, keys...), nil
}

// serveMessage is the message of serve's error body, or nothing; it is
// serve's own text for this token's request, and bounded.
func serveMessage(r io.Reader) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.NewDecoder(io.LimitReader(r, 64<<10)).Decode(&body) != nil || body.Error.Message == "" {
		return "no message"
	}
	return firstLine(errors.New(body.Error.Message))
}
