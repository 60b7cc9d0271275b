package host

import (
	"errors"
	"fmt"
	"testing"
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
	if d.Action != ActionNone {
		t.Fatalf("setup: %+v", d)
	}
	anthropicOverflow := &httpErr{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`}
	retry, err := e.RecoverOverflow(ctx, s, anthropicOverflow)
	if err != nil || !retry {
		t.Fatalf("retry %v err %v", retry, err)
	}
	if len(s.Compactions()) != 1 || len(rec.calls()) == 0 {
		t.Fatal("overflow did not compact")
	}
	must(t, Validate(s.Context(), false))
	if len(events) != 1 || events[0].Provider != "anthropic" || events[0].Silent {
		t.Fatalf("events %+v", events)
	}
	// The retry overflows again: stop instead of looping.
	retry, err = e.RecoverOverflow(ctx, s, anthropicOverflow)
	if retry || !errors.Is(err, ErrOverflowPersists) {
		t.Fatalf("second overflow: retry %v err %v", retry, err)
	}
	// A reply resets the allowance.
	must(t, e.AppendReply(s, assistant("done")))
	coding(t, s, 3, 400)
	if retry, err := e.RecoverOverflow(ctx, s, anthropicOverflow); !retry || err != nil {
		t.Fatalf("after a reply: retry %v err %v", retry, err)
	}
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
		if retry || rerr != nil {
			t.Errorf("%v: retry %v err %v", err, retry, rerr)
		}
	}
	if len(s.Compactions()) != 0 {
		t.Fatal("a non-overflow error compacted the session")
	}
}

func TestRecoverOverflowAdoptsStatedWindow(t *testing.T) {
	e := newEngine(t, Config{ContextWindow: 32768, MaxOutputTokens: 4096, KeepRecentTokens: 8000}, WithStrategy("structured", &recorder{}))
	s := e.NewSession()
	coding(t, s, 4, 700) // ~9k tokens: fine for 32k, too much for 8k
	llamaCpp := &httpErr{400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9500,"n_ctx":8192}}`}
	retry, err := e.RecoverOverflow(ctx, s, llamaCpp)
	if err != nil || !retry {
		t.Fatalf("retry %v err %v", retry, err)
	}
	b := e.Budget()
	if b.ContextWindow != 8192 || b.Input != 8192-2048 {
		t.Fatalf("budget %+v", b)
	}
	if got := e.calibrated(s.ContextTokens()); got > b.Input {
		t.Fatalf("context %d tokens still over the adopted budget %d", got, b.Input)
	}
	must(t, Validate(s.Context(), false))
}
