package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/overflow"
)

// One retry loop serves both providers: the same behaviour, one place to
// test it, and the status and body of every attempt to decide with. It
// knows what a generic client cannot: that a 500 carrying llama.cpp's
// exceed_context_size_error is an overflow that will fail again.

// retry runs call until it succeeds, fails in a way that is not retried,
// or MaxRetries retries are spent.
func (c *client) retry(ctx context.Context, call func(context.Context, *exchange) (*abi.CompleteResponse, error)) (*abi.CompleteResponse, error) {
	for attempt := 1; ; attempt++ {
		resp, err, again, wait := c.attempt(ctx, attempt, call)
		if err == nil {
			return resp, nil
		}
		if !again || attempt > c.cfg.MaxRetries {
			if attempt > 1 {
				return nil, fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
			}
			return nil, err
		}
		d, ok := backoff(c.cfg.RetryBaseDelay, c.cfg.RetryMaxDelay, attempt, wait)
		if !ok {
			return nil, err
		}
		if c.cfg.OnRetry != nil {
			c.cfg.OnRetry(Retry{Attempt: attempt, MaxAttempts: c.cfg.MaxRetries + 1, Err: err, Wait: d})
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("provider %s: %w while waiting to retry after: %w", c.cfg.Kind, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// attempt makes one call with its own timeout and says whether its
// failure may be retried, and after how long the server asked to wait.
func (c *client) attempt(ctx context.Context, n int, call func(context.Context, *exchange) (*abi.CompleteResponse, error)) (resp *abi.CompleteResponse, err error, again bool, wait time.Duration) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ex := &exchange{}
	resp, err = call(actx, ex)
	if err == nil {
		return resp, nil, false, 0
	}
	kind, key := c.cfg.Kind, c.cfg.APIKey
	var empty *EmptyCompletionError
	switch {
	case errors.As(err, &empty):
		return nil, err, false, 0
	case ctx.Err() != nil:
		// The caller's context ended: its error, not a timeout of ours.
		return nil, fmt.Errorf("provider %s: %w", kind, ctx.Err()), false, 0
	case errors.Is(err, context.DeadlineExceeded):
		return nil, &TimeoutError{Provider: kind, Timeout: c.cfg.Timeout, Attempts: n}, true, 0
	case ex.status >= 400:
		e := newError(kind, ex, key)
		if overflow.Classify(e.StatusCode, e.Body).Overflow {
			return nil, e, false, 0
		}
		return nil, e, e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500, e.RetryAfter
	case ex.status == 0:
		// No response at all: refused or reset connection, DNS failure.
		return nil, fmt.Errorf("provider %s: %w", kind, redactErr(err, key)), true, 0
	default:
		// A response that could not be read as a completion.
		return nil, fmt.Errorf("provider %s: HTTP %d: %w", kind, ex.status, redactErr(err, key)), false, 0
	}
}

// backoff returns the wait before retry number attempt (1 for the first):
// base doubled per retry, capped at max, with equal jitter (half fixed,
// half random, so concurrent clients spread out), and never less than what
// the server asked for. ok is false when the server asked for more than
// max: waiting that long is the caller's decision, not a retry's.
func backoff(base, max time.Duration, attempt int, retryAfter time.Duration) (d time.Duration, ok bool) {
	if retryAfter > max {
		return 0, false
	}
	d = base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	if half := d / 2; half > 0 {
		d = half + rand.N(half+1)
	}
	if d < retryAfter {
		d = retryAfter
	}
	return d, true
}

// post sends one JSON request and decodes a 2xx answer into out,
// recording the response's status and headers, and an error response's
// body, in ex for the retry loop to decide with. The status of an error
// response is recorded only once its body is read, so a stall while
// reading it counts as a timeout.
func (ex *exchange) post(ctx context.Context, hc *http.Client, url string, header http.Header, in, out any) error {
	b, err := ex.postRaw(ctx, hc, url, header, in, "application/json")
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("reading the response: %w", err)
	}
	return nil
}

// postRaw is post without the decoding: the 2xx body as it came, up to
// maxResponseBody, asked for as accept.
func (ex *exchange) postRaw(ctx context.Context, hc *http.Client, url string, header http.Header, in any, accept string) ([]byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "compact-host")
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	ex.header = res.Header.Clone()
	if res.StatusCode >= 400 {
		b, err := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		if err != nil {
			return nil, err
		}
		ex.status, ex.body = res.StatusCode, b
		return nil, fmt.Errorf("HTTP %d", res.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBody+1))
	if err != nil {
		return nil, err
	}
	ex.status = res.StatusCode
	if res.StatusCode/100 != 2 {
		return nil, fmt.Errorf("unexpected status %s", res.Status)
	}
	if len(b) > maxResponseBody {
		return nil, fmt.Errorf("response larger than %d bytes", maxResponseBody)
	}
	return b, nil
}
