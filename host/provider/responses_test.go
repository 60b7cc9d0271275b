package provider_test

import (
	"context"
	"errors"
	"testing"

	"github.com/compact-host/compact-host/host/overflow"
	"github.com/compact-host/compact-host/host/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResponsesStreamAsksForAStream(t *testing.T) {
	srv := newFakeAPI(t, reply(200, responsesAPI.ok("summary"), "Content-Type", "text/event-stream"))
	c := newClient(t, responsesAPI.config(srv.URL))
	resp, err := c.Complete(context.Background(), summarizeRequest)
	require.NoError(t, err)
	assert.Equal(t, "summary", resp.Text)
	r := srv.requests()[0]
	assert.Equal(t, true, r.body["stream"])
	assert.Equal(t, false, r.body["store"], "a summary is not kept by the provider")
	assert.Equal(t, "Summarize the conversation.", r.body["instructions"])
	assert.Equal(t, "text/event-stream", r.header.Get("Accept"))
}

// TestResponsesFailedStream: a response that fails inside the stream is
// read as the HTTP error it stands for: an overflow is not retried, a
// server error is.
func TestResponsesFailedStream(t *testing.T) {
	overflowed := responsesEvents(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_3","status":"in_progress","output":[]}}`,
		`{"type":"response.failed","sequence_number":1,"response":{"id":"resp_3","status":"failed","output":[],"error":{"code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again."}}}`)
	srv := newFakeAPI(t, reply(200, overflowed, "Content-Type", "text/event-stream"))
	c := newClient(t, responsesAPI.config(srv.URL))
	_, err := c.Complete(context.Background(), summarizeRequest)
	require.Error(t, err)
	assert.True(t, overflow.FromError(err).Overflow, "err = %v", err)
	var pe *provider.Error
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, "context_length_exceeded", pe.Code)
	assert.Len(t, srv.requests(), 1, "an overflow is not retried")

	serverError := responsesEvents(`{"type":"response.failed","sequence_number":0,"response":{"id":"resp_4","status":"failed","output":[],"error":{"code":"server_error","message":"The server had an error."}}}`)
	srv = newFakeAPI(t, reply(200, serverError, "Content-Type", "text/event-stream"), reply(200, responsesAPI.ok("second try"), "Content-Type", "text/event-stream"))
	c = newClient(t, responsesAPI.config(srv.URL))
	resp, err := c.Complete(context.Background(), summarizeRequest)
	require.NoError(t, err)
	assert.Equal(t, "second try", resp.Text)
	assert.Len(t, srv.requests(), 2)

	srv = newFakeAPI(t, reply(200, responsesEvents(`{"type":"response.created","sequence_number":0,"response":{"id":"resp_5","status":"in_progress","output":[]}}`), "Content-Type", "text/event-stream"))
	c = newClient(t, responsesAPI.config(srv.URL))
	_, err = c.Complete(context.Background(), summarizeRequest)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ended before response.completed")
}

// TestResponsesUnstreamedAnswer: a server that ignores stream and
// answers one response object is read too.
func TestResponsesUnstreamedAnswer(t *testing.T) {
	body := `{"id":"resp_6","object":"response","status":"completed","model":"gpt-4.1-mini","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"plain answer","annotations":[]}]}],"usage":{"input_tokens":10,"output_tokens":2}}`
	srv := newFakeAPI(t, reply(200, body))
	c := newClient(t, responsesAPI.config(srv.URL))
	resp, err := c.Complete(context.Background(), summarizeRequest)
	require.NoError(t, err)
	assert.Equal(t, "plain answer", resp.Text)
	assert.Equal(t, 10, resp.Usage.InputTokens)
}
