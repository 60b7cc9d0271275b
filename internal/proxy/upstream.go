package proxy

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/compact-host/compact-host/host/overflow"
	"github.com/compact-host/compact-host/internal/redact"
)

type exchangeKey struct{}

// upstreamTransport sends requests upstream, times them, and turns a
// context-overflow answer to a messages request into one compaction and
// one retry, so the client sees the retry's answer.
type upstreamTransport struct {
	p    *Proxy
	base http.RoundTripper
}

// maxErrorBody bounds how much of an error answer is read to classify it.
const maxErrorBody = 1 << 20

func (t *upstreamTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	x, _ := req.Context().Value(exchangeKey{}).(*exchange)
	kind := t.p.errorKind(req)
	if x != nil {
		kind = x.kind
		t.p.m.addedTime.WithLabelValues(kind).Observe(time.Since(x.began).Seconds())
	}
	resp, err := t.send(req, kind)
	if err != nil || x == nil || resp.StatusCode < 400 {
		return x.observe(resp), err
	}
	body, err := readErrorBody(resp)
	if err != nil {
		return nil, err
	}
	res := overflow.Classify(resp.StatusCode, body)
	if !res.Overflow {
		return resp, nil
	}
	retry, ok := x.recoverOverflow(req.Context(), resp.StatusCode, body, res)
	if !ok {
		t.p.m.overflows.WithLabelValues("passed").Inc()
		return resp, nil
	}
	t.p.m.overflows.WithLabelValues("retried").Inc()
	resp.Body.Close()
	again := req.Clone(req.Context())
	again.Header.Del("Content-Encoding") // the retry is the plain rewritten body
	again.Body = io.NopCloser(bytes.NewReader(retry))
	again.ContentLength = int64(len(retry))
	again.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(retry)), nil }
	resp, err = t.send(again, kind)
	return x.observe(resp), err
}

func (t *upstreamTransport) send(req *http.Request, kind string) (*http.Response, error) {
	sent := time.Now()
	resp, err := t.base.RoundTrip(req)
	t.p.m.upstreamTime.WithLabelValues(kind).Observe(time.Since(sent).Seconds())
	return resp, err
}

// readErrorBody reads an error answer (up to maxErrorBody) for
// classification and puts it back, as it came, for the client.
func readErrorBody(resp *http.Response) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(raw), resp.Body), resp.Body}
	if strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, nil
		}
		plain, _ := io.ReadAll(io.LimitReader(zr, maxErrorBody))
		return plain, nil
	}
	return raw, nil
}

// errorKind guesses the API of a request that is not a messages request,
// for the shape of an error the proxy answers itself.
func (p *Proxy) errorKind(r *http.Request) string {
	if p.o.Kind != "" {
		return p.o.Kind
	}
	// Gemini's key, or one of its conversation paths; OpenAI has
	// /v1/models/<id> too, so the path alone is not enough.
	if _, ok := geminiModelOf(strings.TrimSuffix(r.URL.Path, "/")); ok || r.Header.Get("X-Goog-Api-Key") != "" || r.URL.Query().Has("key") {
		return KindGemini
	}
	if r.Header.Get("X-Api-Key") != "" || r.Header.Get("Anthropic-Version") != "" || strings.HasPrefix(r.URL.Path, "/v1/messages") {
		return KindAnthropic
	}
	return KindOpenAI
}

// upstreamError answers a request the upstream could not be asked.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	kind := p.errorKind(r)
	if x, ok := r.Context().Value(exchangeKey{}).(*exchange); ok {
		kind = x.kind
	}
	status, typ := http.StatusBadGateway, "api_error"
	if errors.Is(err, r.Context().Err()) && r.Context().Err() != nil {
		// The client went away; nobody reads the answer.
		status = 499
	}
	known := p.credentialsOf(r).known
	slog.New(p.logs.WithKnown(known...)).Warn("upstream request failed", "kind", kind, "path", r.URL.Path, "err", err)
	p.writeError(w, kind, status, typ, "compact-host proxy: the upstream could not be reached: "+err.Error(), known)
}

// writeError answers in the API's own error shape, so the agent's SDK
// reports it as it would the provider's. msg is redacted, with known the
// request's own secrets.
func (p *Proxy) writeError(w http.ResponseWriter, kind string, status int, typ, msg string, known []string) {
	msg = redact.String(msg, known...)
	var body any
	switch kind {
	case KindAnthropic:
		body = map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}}
	case KindGemini:
		body = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": geminiStatus(status)}}
	default:
		code := strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_"))
		if code == "" {
			code = strconv.Itoa(status)
		}
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}}
	}
	data, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	w.Write(data)
}

// geminiStatus is the google.rpc status name the Gemini API gives an
// HTTP status in its errors.
func geminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	case 499:
		return "CANCELLED"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	}
	return "UNKNOWN"
}

// credentialHeaders are the client's headers that the summary calls carry
// to the same upstream: the keys and what selects the account or project.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Anthropic-Beta", "Anthropic-Version",
	"Openai-Organization", "Openai-Project"}

// credentialTransport sends the summary calls with the client's own
// credentials, replacing whatever the SDK set, so the proxy holds no key.
type credentialTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t *credentialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for _, h := range credentialHeaders {
		if v := t.header.Values(h); len(v) > 0 {
			req.Header[h] = append([]string(nil), v...)
		}
	}
	return t.base.RoundTrip(req)
}
