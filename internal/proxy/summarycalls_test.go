package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/compact-host/compact-host/internal/redact"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHangingSummaryCostsOneProviderTimeout(t *testing.T) {
	r := newRig(t, func(o *Options) {
		o.ProviderTimeout = time.Second
		o.ProviderMaxRetries = -1
	})
	cancelled := make(chan bool, 10)
	r.up.onSummary = func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-req.Context().Done():
			cancelled <- true
		case <-time.After(waitFor): // a hang guard
			cancelled <- false
		}
	}
	client := &http.Client{Timeout: waitFor}
	req, err := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/messages", bytesReader(anthropicBody(t, 11, false)))
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", testKey)
	began := time.Now()
	resp, err := client.Do(req)
	require.NoError(t, err, "the request outlived its hang guard")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(began)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, <-cancelled, "the summary call was not cancelled by the provider timeout")
	assert.Len(t, r.up.summaryRequests(), 1, "after one timed-out summary call the request asks no more")
	// One second configured; the margin is for a loaded machine. Without
	// the setting each of two strategies waited two minutes.
	assert.Less(t, took, time.Minute)
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	assert.NotNil(t, checkFaithful(t, anthropicBody(t, 11, false), got[0].Body), "compacted without the model")
}

func TestNoKeyInAnyLogLine(t *testing.T) {
	// Keys of no recognizable shape, which only the exact values the
	// proxy saw can catch, and one Gemini-style query key.
	const apiKey, bearer, queryKey = "plain-secret-value-0001", "oauth-token-value-0002", "query-secret-value-0003"
	r := newRig(t, func(o *Options) { o.ProviderMaxRetries = -1 })
	// The upstream refuses summary calls and quotes every header back.
	r.up.onSummary = func(w http.ResponseWriter, req *http.Request) {
		headers, _ := json.Marshal(req.Header)
		writeJSON(w, http.StatusBadRequest, fmt.Sprintf(`{"type":"error","error":{"type":"invalid_request_error","message":%s}}`,
			quote("bad request; you sent "+string(headers)+" to "+req.URL.String())))
	}
	headers := map[string]string{"X-Api-Key": apiKey, "Authorization": "Bearer " + bearer}
	resp, _ := post(t, r.srv.URL+"/v1/messages?key="+url.QueryEscape(queryKey), anthropicBody(t, 11, false), headers)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = post(t, r.srv.URL+"/v1/chat/completions?key="+url.QueryEscape(queryKey), openAIBody(t, 11, false), headers)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	logs := r.logs.String()
	require.Contains(t, logs, "strategy failed; falling back", "the test must exercise the failure's log line")
	require.Contains(t, logs, "bad request; you sent", "the upstream's words are logged")
	for _, secret := range []string{apiKey, bearer, queryKey} {
		assert.NotContains(t, logs, secret)
	}
	assert.Contains(t, logs, "[redacted]")
}

func TestRedactHandlerHidesEveryForm(t *testing.T) {
	var out syncBuffer
	h := redact.Handler(newJSONLogger(&out).Handler()).WithKnown("opaque-known-value")
	log := slog.New(h).With("header", "x-api-key: sk-ant-api03-abcdefgh1234")
	log.Error("failed: Bearer abcdefghijklmnop", "err", fmt.Errorf("upstream said %s", "opaque-known-value"),
		"nested", map[string]string{"Authorization": "opaque-known-value"}, slog.Group("g", slog.String("k", "sk-proj-abcdefgh12345678")))
	s := out.String()
	for _, secret := range []string{"opaque-known-value", "sk-ant-api03-abcdefgh1234", "abcdefghijklmnop", "sk-proj-abcdefgh12345678"} {
		assert.NotContains(t, s, secret)
	}
	assert.Equal(t, 5, strings.Count(s, "[redacted]"), s)
}

func TestBreakerHoldsAcrossConversationsOfATenant(t *testing.T) {
	r := newRig(t, func(o *Options) {
		o.ProviderMaxRetries = -1
		o.Config.BreakerFailures = 3
		o.Config.BreakerCooldown = time.Hour
	})
	r.up.onSummary = func(w http.ResponseWriter, req *http.Request) {
		writeJSON(w, http.StatusInternalServerError, `{"type":"error","error":{"type":"api_error","message":"overloaded"}}`)
	}
	send := func(conv int, key string) {
		t.Helper()
		resp, _ := post(t, r.srv.URL+"/v1/messages", convBody(t, 11, fmt.Sprintf("Agent %d.", conv), "x"), map[string]string{"X-Api-Key": key})
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	const keyA, keyB = "sk-ant-api03-breaker-A-01", "sk-ant-api03-breaker-B-02"
	for conv := range 3 {
		send(conv, keyA)
		assert.Equal(t, conv+1, summariesBy(r.up, "X-Api-Key", keyA), "one failed summary call per conversation")
	}
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, "compact_host_proxy_summary_breaker_opened_total"))
	// New conversations of the tenant make no summary call: they are
	// compacted offline.
	for conv := 3; conv < 6; conv++ {
		send(conv, keyA)
	}
	assert.Equal(t, 3, summariesBy(r.up, "X-Api-Key", keyA), "the open breaker let summary calls through")
	assert.Equal(t, 3.0, metricValue(t, r.srv.URL, "compact_host_proxy_summary_breaker_skipped_total"))
	assert.Equal(t, 6.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="compacted"`), "the offline path still compacts")
	// Another tenant's breaker is its own.
	send(0, keyB)
	assert.Equal(t, 1, summariesBy(r.up, "X-Api-Key", keyB))
}
