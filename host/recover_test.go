package host

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// httpErr is a provider error as an agent's own HTTP client would report it.
type httpErr struct {
	status int
	body   string
}

func (e *httpErr) Error() string    { return fmt.Sprintf("status %d", e.status) }
func (e *httpErr) HTTPStatus() int  { return e.status }
func (e *httpErr) HTTPBody() []byte { return []byte(e.body) }

func TestRecoverOverflowCompactsAndRetriesOnce(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, Config{KeepRecentTokens: 2000}, WithStrategy("structured", rec))
	var events []*OverflowEvent
	e.Subscribe(func(ev Event) {
		if o, ok := ev.(*OverflowEvent); ok {
			events = append(events, o)
		}
	})
	s := e.NewSession()
	coding(t, s, 3, 400) // well below every threshold
	d, _ := e.EnsureFits(ctx, s, Request{})
	require.Equal(t, ActionNone, d.Action, "setup: %+v", d)
	anthropicOverflow := &httpErr{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`}
	retry, err := e.RecoverOverflow(ctx, s, anthropicOverflow)
	require.NoError(t, err)
	require.True(t, retry)
	require.Len(t, s.Compactions(), 1, "overflow did not compact")
	require.NotEmpty(t, rec.calls(), "overflow did not compact")
	require.NoError(t, Validate(s.Context(), false))
	require.Len(t, events, 1, "events %+v", events)
	require.Equal(t, "anthropic", events[0].Provider)
	require.False(t, events[0].Silent)
	// The retry overflows again: stop instead of looping.
	retry, err = e.RecoverOverflow(ctx, s, anthropicOverflow)
	require.ErrorIs(t, err, ErrOverflowPersists, "second overflow")
	require.False(t, retry, "second overflow")
	// A reply resets the allowance.
	require.NoError(t, e.AppendReply(s, assistant("done")))
	coding(t, s, 3, 400)
	retry, err = e.RecoverOverflow(ctx, s, anthropicOverflow)
	require.NoError(t, err, "after a reply")
	require.True(t, retry, "after a reply")
}

func TestRecoverOverflowIgnoresOtherErrors(t *testing.T) {
	e := newEngine(t, Config{}, WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	coding(t, s, 3, 400)
	for _, err := range []error{
		&httpErr{429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`},
		&httpErr{500, `{"error":{"message":"internal"}}`},
		errors.New("connection reset by peer"),
	} {
		retry, rerr := e.RecoverOverflow(ctx, s, err)
		assert.NoError(t, rerr, "%v", err)
		assert.False(t, retry, "%v", err)
	}
	require.Empty(t, s.Compactions(), "a non-overflow error compacted the session")
}

func TestRecoverOverflowAdoptsStatedWindow(t *testing.T) {
	e := newEngine(t, Config{ContextWindow: 32768, MaxOutputTokens: 4096, KeepRecentTokens: 8000}, WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	coding(t, s, 4, 700) // ~9k tokens: fine for 32k, too much for 8k
	llamaCpp := &httpErr{400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9500,"n_ctx":8192}}`}
	retry, err := e.RecoverOverflow(ctx, s, llamaCpp)
	require.NoError(t, err)
	require.True(t, retry)
	b := e.Budget()
	require.Equal(t, 8192, b.ContextWindow, "budget %+v", b)
	require.Equal(t, 8192-2048, b.Input, "budget %+v", b)
	require.LessOrEqual(t, e.calibrated(s.ContextTokens()), b.Input, "context still over the adopted budget")
	require.NoError(t, Validate(s.Context(), false))
}
