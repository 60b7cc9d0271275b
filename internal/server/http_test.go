package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBodyOverTheLimitIs413(t *testing.T) {
	_, ts := start(t, func(o *Options) { o.MaxRequestBytes = 4096 })
	big := `{"content":"` + strings.Repeat("x", 5000) + `"}`

	// With a Content-Length, refused before reading.
	r := call(t, ts, "POST", "/v1/truncate", big)
	e := r.wantError(t, http.StatusRequestEntityTooLarge, CodeTooLarge)
	assert.Contains(t, e.Message, "4096")
	// Chunked, without one: cut off while reading.
	req, _ := http.NewRequest("POST", ts.URL+"/v1/truncate", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "chunked")
	assert.Contains(t, string(body), CodeTooLarge)
	// At the limit, served.
	ok := `{"content":"` + strings.Repeat("x", 4096-len(`{"content":""}`)) + `"}`
	call(t, ts, "POST", "/v1/truncate", ok).wantStatus(t, http.StatusOK)
}

func TestBearerToken(t *testing.T) {
	_, ts := start(t, func(o *Options) { o.Tokens = []Token{{Secret: "s3cret-token"}} })
	for _, tc := range []struct {
		name, auth string
		want       int
		challenge  string
	}{
		{"none", "", 401, `Bearer realm="compact-host"`},
		{"wrong", "Bearer s3cret-tokeN", 401, `Bearer realm="compact-host", error="invalid_token"`},
		{"prefix of the token", "Bearer s3cret", 401, `Bearer realm="compact-host", error="invalid_token"`},
		{"other scheme", "Basic czNjcmV0LXRva2Vu", 401, `Bearer realm="compact-host", error="invalid_token"`},
		{"right", "Bearer s3cret-token", 200, ""},
		{"scheme in lower case", "bearer s3cret-token", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, ts, "GET", "/v1/plugins", nil, "Authorization", tc.auth)
			r.wantStatus(t, tc.want)
			if tc.want == 401 {
				r.wantError(t, 401, CodeUnauthorized)
				assert.Equal(t, tc.challenge, r.Header.Get("WWW-Authenticate"))
			}
		})
	}
	// Every endpoint but the health check needs it.
	for _, path := range []string{"/v1/compact", "/v1/check", "/v1/truncate"} {
		assert.Equal(t, 401, call(t, ts, "POST", path, `{}`).Status, "%s without a token", path)
	}
	assert.Equal(t, 200, call(t, ts, "GET", "/healthz", nil).Status, "/healthz without a token")
}

func TestMalformedSessionNamesTheLine(t *testing.T) {
	_, ts := start(t, nil)
	lines := []string{
		`{"role":"user","content":[{"type":"text","text":"hi"}]}`,
		`{"role":"assistant","content":[{"type":"text","text":"hello"}]}`,
		`{"role":"user","content":[{"type":"text","text":"oops"}],}`,
		`{"role":"assistant","content":[{"type":"text","text":"never read"}]}`,
	}
	for _, tc := range []struct {
		name, format string
		lines        []string
		line         int
	}{
		{"canonical JSONL", "", lines, 3},
		{"session log", "", []string{
			`{"type":"message","message":{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}]}}`,
			`{"type":"message","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"hello"}]}}`,
			`{"type":"compaction","compaction":{"id":"c1","folded_through":"m9","summary":"s"}}`,
			`{"type":"message","message":{"id":"m3","role":"user","content":[{"type":"text","text":"x"}]}}`,
		}, 3},
		{"claude-code named", "claude-code", []string{
			`{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}`,
			`{"type":"assistant","uuid":"u2","message":{"role":"assistant","content":[{"type":"text","text":"hi"}]}}`,
			`not json at all`,
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			session, _ := json.Marshal(strings.Join(tc.lines, "\n") + "\n")
			r := call(t, ts, "POST", "/v1/compact", CompactRequest{Session: session, Format: tc.format})
			e := r.wantError(t, 400, CodeBadSession)
			assert.Equal(t, tc.line, e.Line)
			assert.Contains(t, e.Message, fmt.Sprintf("session:%d", tc.line))
		})
	}
	// An array of messages: line N is element N.
	r := call(t, ts, "POST", "/v1/check", `{"session":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"robot","content":[]}]}`)
	e := r.wantError(t, 400, CodeBadSession)
	assert.Equal(t, 2, e.Line, "an array's line is its element")
	assert.Contains(t, e.Message, "robot")
}

func TestMalformedBodies(t *testing.T) {
	_, ts := start(t, nil)
	for _, tc := range []struct {
		name, path, body string
		code             string
		mention          string
	}{
		{"empty", "/v1/compact", ``, CodeBadJSON, "empty"},
		{"syntax error on line 3", "/v1/compact", "{\n\"session\": [],\n\"format\": ,\n}", CodeBadJSON, "line 3"},
		{"not an object", "/v1/truncate", `["content"]`, CodeBadJSON, "object"},
		{"two objects", "/v1/truncate", `{"content":"a"} {"content":"b"}`, CodeBadJSON, "one JSON object"},
		{"unknown field", "/v1/compact", `{"session":[],"sesion":[]}`, CodeUnknownField, `"sesion"`},
		{"unknown option", "/v1/compact", `{"session":[],"options":{"dryrun":true}}`, CodeUnknownField, `"dryrun"`},
		{"unknown truncate field", "/v1/truncate", `{"content":"x","max":3}`, CodeUnknownField, `"max"`},
		{"unknown format", "/v1/compact", `{"session":[],"format":"xml"}`, CodeUnknownFormat, "xml"},
		{"array with another format", "/v1/compact", `{"session":[{}],"format":"openai"}`, CodeBadRequest, "array"},
		{"empty array", "/v1/compact", `{"session":[]}`, CodeBadRequest, "no messages"},
		{"field of the wrong type", "/v1/compact", `{"session":[],"options":{"context_window":"x"}}`, CodeBadRequest, `options.context_window: want a token count such as 16000, 16_000, 16k or 1.5m (a number or a string), from 0 to 32000000; got JSON string "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, ts, "POST", tc.path, tc.body)
			e := r.wantError(t, 400, tc.code)
			assert.Contains(t, e.Message, tc.mention)
		})
	}
}

func TestRoutes(t *testing.T) {
	_, ts := start(t, nil)
	r := call(t, ts, "GET", "/v1/compactt", nil)
	r.wantError(t, 404, CodeNotFound)
	r = call(t, ts, "GET", "/v1/compact", nil)
	r.wantError(t, 405, CodeMethodNotAllowed)
	assert.Equal(t, "POST", r.Header.Get("Allow"))
	r = call(t, ts, "POST", "/healthz", `{}`)
	assert.Equal(t, 405, r.Status)
	assert.Equal(t, "GET", r.Header.Get("Allow"))
	assert.Equal(t, "application/json; charset=utf-8", call(t, ts, "GET", "/healthz", nil).Header.Get("Content-Type"))
}

// TestBusyWhenNoWorkerFrees takes every worker; a request then waits for
// one until its timeout.
func TestBusyWhenNoWorkerFrees(t *testing.T) {
	s, ts := start(t, func(o *Options) { o.MaxConcurrent = 2; o.RequestTimeout = 200 * time.Millisecond })
	s.slots <- struct{}{}
	s.slots <- struct{}{}
	r := call(t, ts, "POST", "/v1/truncate", `{"content":"x"}`)
	r.wantError(t, 503, CodeBusy)
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	// Requests that need no worker are still served.
	call(t, ts, "GET", "/healthz", nil).wantStatus(t, 200)
	<-s.slots
	call(t, ts, "POST", "/v1/truncate", `{"content":"x"}`).wantStatus(t, 200)
	eventually(t, "the request gives its worker back", func() error {
		if n := len(s.slots); n != 1 {
			return fmt.Errorf("%d busy", n)
		}
		return nil
	})
}

// TestSlowBodyFreesItsWorker sends a body that never ends: the request
// fails at its timeout and gives its worker back.
func TestSlowBodyFreesItsWorker(t *testing.T) {
	s, ts := start(t, func(o *Options) { o.MaxConcurrent = 1; o.RequestTimeout = 300 * time.Millisecond })
	pr, pw := io.Pipe()
	defer pw.Close()
	pw2 := make(chan struct{})
	go func() {
		pw.Write([]byte(`{"content":`))
		close(pw2)
	}()
	req, _ := http.NewRequest("POST", ts.URL+"/v1/truncate", pr)
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	<-pw2
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), CodeTimeout)
	eventually(t, "the request gives its worker back", func() error {
		if n := len(s.slots); n != 0 {
			return fmt.Errorf("%d busy", n)
		}
		return nil
	})
	call(t, ts, "POST", "/v1/truncate", `{"content":"x"}`).wantStatus(t, 200)
}

// stuckModel is a provider that answers only when its context ends.
type stuckModel struct{}

func (stuckModel) Complete(ctx context.Context, _ *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (stuckModel) Model() string { return "stuck" }

func TestWorkOutlastingTheTimeoutIs504(t *testing.T) {
	_, ts := start(t, func(o *Options) { o.Model = stuckModel{}; o.RequestTimeout = 500 * time.Millisecond })
	r := call(t, ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, formats.Anthropic, codingSession(20, 8, 600))})
	r.wantError(t, http.StatusGatewayTimeout, CodeTimeout)
}
