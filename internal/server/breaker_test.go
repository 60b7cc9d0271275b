package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"
)

// failingModel is a provider whose every call fails, and counts them.
type failingModel struct{ calls atomic.Int64 }

func (m *failingModel) Complete(context.Context, *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	m.calls.Add(1)
	return nil, errors.New("HTTP 529: overloaded")
}
func (m *failingModel) Model() string { return "claude-sonnet-4-5" }

// A tenant's failing summary calls open its breaker across its requests
// and sessions: after BreakerFailures requests that each failed a call,
// its next compaction calls no model (and still answers, offline), while
// another tenant's calls go out. Each request's engine had its own
// breaker, which never saw a second failure.
func TestSummaryBreakerHoldsAcrossATenantsRequests(t *testing.T) {
	model := &failingModel{}
	_, ts := start(t, func(o *Options) {
		o.Model = model
		o.Config.BreakerFailures = 2
		o.Tokens = []Token{{Name: "a", Secret: tokenA}, {Name: "b", Secret: tokenB}}
	})
	compact := func(token string, seed int) int64 {
		t.Helper()
		before := model.calls.Load()
		body := CompactRequest{Session: encode(t, formats.Anthropic, codingSession(seed, 8, 600))}
		r := call(t, ts, http.MethodPost, "/v1/compact", body, "Authorization", "Bearer "+token)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return model.calls.Load() - before
	}
	assert.Equal(t, int64(1), compact(tokenA, 51), "the first request tries the model once")
	assert.Equal(t, int64(1), compact(tokenA, 52), "the second, of another session, once")
	assert.Zero(t, compact(tokenA, 53), "the breaker is open: no call")
	assert.Equal(t, int64(1), compact(tokenB, 54), "another tenant's calls go out")
}

// leakyModel is a provider whose errors quote the request's credentials
// back, as some upstreams' error bodies do.
type leakyModel struct{}

func (leakyModel) Complete(context.Context, *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	return nil, errors.New(`HTTP 401: {"error": "invalid x-api-key sk-ant-api03-Zq9vLk2mNw8pXr4t", "echo": "Bearer ` + tokenA + `"}`)
}
func (leakyModel) Model() string { return "claude-sonnet-4-5" }

// An upstream body quoted back in a plugin's failure reaches neither the
// answer (its fallbacks) nor the server's log with the credentials in it.
func TestUpstreamCredentialsAreRedacted(t *testing.T) {
	var logs syncBuffer
	_, ts := start(t, func(o *Options) {
		o.Model = leakyModel{}
		o.Tokens = []Token{{Name: "a", Secret: tokenA}}
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	body := CompactRequest{Session: encode(t, formats.Anthropic, codingSession(55, 8, 600))}
	r := call(t, ts, http.MethodPost, "/v1/compact", body, "Authorization", "Bearer "+tokenA)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var got CompactResponse
	r.decode(t, &got)
	require.NotEmpty(t, got.Report.Fallbacks, "the failure is reported")
	assert.Contains(t, strings.Join(got.Report.Fallbacks, "\n"), "HTTP 401", "the failure keeps its reason")
	for _, secret := range []string{"sk-ant-api03-Zq9vLk2mNw8pXr4t", tokenA} {
		assert.NotContains(t, string(r.Body), secret, "the answer")
		assert.NotContains(t, logs.String(), secret, "the log")
	}
}
