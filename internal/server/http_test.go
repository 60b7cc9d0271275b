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
)

func TestBodyOverTheLimitIs413(t *testing.T) {
	_, ts := start(t, func(o *Options) { o.MaxRequestBytes = 4096 })
	big := `{"content":"` + strings.Repeat("x", 5000) + `"}`

	// With a Content-Length, refused before reading.
	r := call(t, ts, "POST", "/v1/truncate", big)
	if e := r.err(t); r.Status != http.StatusRequestEntityTooLarge || e.Code != CodeTooLarge || !strings.Contains(e.Message, "4096") {
		t.Fatalf("%d %+v", r.Status, e)
	}
	// Chunked, without one: cut off while reading.
	req, _ := http.NewRequest("POST", ts.URL+"/v1/truncate", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), CodeTooLarge) {
		t.Fatalf("chunked: %d %s", resp.StatusCode, body)
	}
	// At the limit, served.
	ok := `{"content":"` + strings.Repeat("x", 4096-len(`{"content":""}`)) + `"}`
	if r := call(t, ts, "POST", "/v1/truncate", ok); r.Status != http.StatusOK {
		t.Fatalf("a body at the limit: %d %s", r.Status, r.Body)
	}
}

func TestBearerToken(t *testing.T) {
	_, ts := start(t, func(o *Options) { o.Token = "s3cret-token" })
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
			if r.Status != tc.want {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.want, r.Body)
			}
			if tc.want == 401 {
				if e := r.err(t); e.Code != CodeUnauthorized || r.Header.Get("WWW-Authenticate") != tc.challenge {
					t.Fatalf("code %q challenge %q", e.Code, r.Header.Get("WWW-Authenticate"))
				}
			}
		})
	}
	// Every endpoint but the health check needs it.
	for _, path := range []string{"/v1/compact", "/v1/check", "/v1/truncate"} {
		if r := call(t, ts, "POST", path, `{}`); r.Status != 401 {
			t.Errorf("%s without a token: %d", path, r.Status)
		}
	}
	if r := call(t, ts, "GET", "/healthz", nil); r.Status != 200 {
		t.Errorf("/healthz without a token: %d", r.Status)
	}
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
			e := r.err(t)
			if r.Status != 400 || e.Code != CodeBadSession || e.Line != tc.line || !strings.Contains(e.Message, fmt.Sprintf("session:%d", tc.line)) {
				t.Fatalf("%d %+v, want 400 bad_session at line %d", r.Status, e, tc.line)
			}
		})
	}
	// An array of messages: line N is element N.
	r := call(t, ts, "POST", "/v1/check", `{"session":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"robot","content":[]}]}`)
	if e := r.err(t); r.Status != 400 || e.Code != CodeBadSession || e.Line != 2 || !strings.Contains(e.Message, "robot") {
		t.Fatalf("array: %d %+v", r.Status, e)
	}
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
		{"field of the wrong type", "/v1/compact", `{"session":[],"options":{"context_window":"x"}}`, CodeBadRequest, "options.context_window: expected a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, ts, "POST", tc.path, tc.body)
			e := r.err(t)
			if r.Status != 400 || e.Code != tc.code || !strings.Contains(e.Message, tc.mention) {
				t.Fatalf("%d %+v, want 400 %s mentioning %q", r.Status, e, tc.code, tc.mention)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	_, ts := start(t, nil)
	r := call(t, ts, "GET", "/v1/compactt", nil)
	if e := r.err(t); r.Status != 404 || e.Code != CodeNotFound {
		t.Fatalf("unknown path: %d %+v", r.Status, e)
	}
	r = call(t, ts, "GET", "/v1/compact", nil)
	if e := r.err(t); r.Status != 405 || e.Code != CodeMethodNotAllowed || r.Header.Get("Allow") != "POST" {
		t.Fatalf("GET /v1/compact: %d %+v allow %q", r.Status, e, r.Header.Get("Allow"))
	}
	r = call(t, ts, "POST", "/healthz", `{}`)
	if r.Status != 405 || r.Header.Get("Allow") != "GET" {
		t.Fatalf("POST /healthz: %d", r.Status)
	}
	if ct := call(t, ts, "GET", "/healthz", nil).Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("content type %q", ct)
	}
}

// TestBusyWhenNoWorkerFrees takes every worker; a request then waits for
// one until its timeout.
func TestBusyWhenNoWorkerFrees(t *testing.T) {
	s, ts := start(t, func(o *Options) { o.MaxConcurrent = 2; o.RequestTimeout = 200 * time.Millisecond })
	s.slots <- struct{}{}
	s.slots <- struct{}{}
	r := call(t, ts, "POST", "/v1/truncate", `{"content":"x"}`)
	if e := r.err(t); r.Status != 503 || e.Code != CodeBusy || r.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %+v", r.Status, e)
	}
	// Requests that need no worker are still served.
	if r := call(t, ts, "GET", "/healthz", nil); r.Status != 200 {
		t.Fatalf("healthz while busy: %d", r.Status)
	}
	<-s.slots
	if r := call(t, ts, "POST", "/v1/truncate", `{"content":"x"}`); r.Status != 200 {
		t.Fatalf("with a worker free: %d %s", r.Status, r.Body)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	<-pw2
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), CodeTimeout) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	eventually(t, "the request gives its worker back", func() error {
		if n := len(s.slots); n != 0 {
			return fmt.Errorf("%d busy", n)
		}
		return nil
	})
	if r := call(t, ts, "POST", "/v1/truncate", `{"content":"x"}`); r.Status != 200 {
		t.Fatalf("next request: %d %s", r.Status, r.Body)
	}
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
	if e := r.err(t); r.Status != http.StatusGatewayTimeout || e.Code != CodeTimeout {
		t.Fatalf("%d %+v", r.Status, e)
	}
}
