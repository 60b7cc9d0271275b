package provider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// responsesBackend asks for summaries through OpenAI's Responses API
// (POST {BaseURL}/responses), streamed: the API a Responses client such
// as Codex already talks to, and the only one some of its backends serve.
type responsesBackend struct {
	hc     *http.Client
	url    string
	header http.Header
}

func newResponses(cfg Config) *responsesBackend {
	url, h := openAIEndpoint(cfg, "/responses")
	return &responsesBackend{hc: cfg.HTTPClient, url: url, header: h}
}

// The Responses request and the parts of its events a summary needs.
type (
	responsesInput struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	responsesRequest struct {
		Model           string           `json:"model"`
		Instructions    string           `json:"instructions,omitempty"`
		Input           []responsesInput `json:"input"`
		MaxOutputTokens int              `json:"max_output_tokens,omitempty"`
		Stream          bool             `json:"stream"`
		Store           bool             `json:"store"`
	}
	responsesObject struct {
		Model             string `json:"model"`
		Status            string `json:"status"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Error  json.RawMessage `json:"error"`
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Type    string `json:"type"`
				Text    string `json:"text"`
				Refusal string `json:"refusal"`
			} `json:"content"`
		} `json:"output"`
		Usage struct {
			InputTokens        int `json:"input_tokens"`
			OutputTokens       int `json:"output_tokens"`
			InputTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	responsesEvent struct {
		Type     string          `json:"type"`
		Delta    string          `json:"delta"`
		Response responsesObject `json:"response"`
		Error    json.RawMessage `json:"error"`
		Status   int             `json:"status"`
	}
)

func (b *responsesBackend) send(ctx context.Context, model string, p prompt, maxTokens int, ex *exchange) (*abi.CompleteResponse, error) {
	req := responsesRequest{Model: model, Instructions: p.system, MaxOutputTokens: maxTokens, Stream: true,
		Input: make([]responsesInput, 0, len(p.turns))}
	for _, t := range p.turns {
		role := abi.RoleUser
		if t.role == abi.RoleAssistant {
			role = abi.RoleAssistant
		}
		req.Input = append(req.Input, responsesInput{Role: role, Content: t.text})
	}
	body, err := ex.postRaw(ctx, b.hc, b.url, b.header, req, "text/event-stream")
	if err != nil {
		return nil, err
	}
	resp, deltas, err := readResponses(body, ex)
	if err != nil {
		return nil, err
	}
	prompt := resp.Usage.InputTokens
	cached := min(max(resp.Usage.InputTokensDetails.CachedTokens, 0), prompt)
	usage := abi.Usage{InputTokens: prompt - cached, OutputTokens: resp.Usage.OutputTokens, CacheReadTokens: cached}
	got := resp.Model
	if got == "" {
		got = model
	}
	var text, refusal strings.Builder
	for _, o := range resp.Output {
		for _, c := range o.Content {
			text.WriteString(c.Text)
			refusal.WriteString(c.Refusal)
		}
	}
	out := text.String()
	if len(resp.Output) == 0 {
		out = deltas // a stream whose last event carried no output
	}
	if strings.TrimSpace(out) == "" {
		reason := resp.Status
		if resp.IncompleteDetails != nil && resp.IncompleteDetails.Reason != "" {
			reason = resp.IncompleteDetails.Reason
		}
		if refusal.Len() > 0 {
			reason = "refusal"
		}
		return nil, &EmptyCompletionError{Provider: KindResponses, Model: got, StopReason: reason, Usage: usage}
	}
	return &abi.CompleteResponse{Text: out, Usage: usage, Model: got}, nil
}

// readResponses reads a Responses answer: the events of a stream, or one
// response object from a server that does not stream. A failed response
// is recorded in ex as an error answer (status and the error's body), so
// the retry loop decides on it as on an HTTP error: an overflow is not
// retried, a server error is.
func readResponses(body []byte, ex *exchange) (resp responsesObject, deltas string, err error) {
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '{' {
		if err := json.Unmarshal(b, &resp); err != nil {
			return resp, "", fmt.Errorf("reading the response: %w", err)
		}
		return resp, "", failed(resp.Status, resp.Error, ex)
	}
	var text strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), maxResponseBody)
	done := false
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if len(data) == 0 || string(data) == "[DONE]" {
			continue
		}
		var ev responsesEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return resp, "", fmt.Errorf("reading the response stream: %w", err)
		}
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed", "response.incomplete":
			resp, done = ev.Response, true
		case "response.failed":
			return resp, "", failed("failed", ev.Response.Error, ex)
		case "error":
			e := ev.Error
			if len(e) == 0 {
				e = data
			}
			status := ev.Status
			if status == 0 {
				status = http.StatusBadRequest
			}
			return resp, "", failedWith(status, e, ex)
		}
	}
	if err := sc.Err(); err != nil {
		return resp, "", fmt.Errorf("reading the response stream: %w", err)
	}
	if !done {
		return resp, "", errors.New("the response stream ended before response.completed")
	}
	return resp, text.String(), nil
}

// failed records a failed response's error in ex, with the status an
// HTTP answer would have had: 500 for the server's own error, else 400.
func failed(status string, e json.RawMessage, ex *exchange) error {
	if status != "failed" {
		return nil
	}
	code := http.StatusBadRequest
	var head struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(e, &head) == nil && head.Code == "server_error" {
		code = http.StatusInternalServerError
	}
	return failedWith(code, e, ex)
}

func failedWith(status int, e json.RawMessage, ex *exchange) error {
	if len(e) == 0 {
		e = json.RawMessage(`{}`)
	}
	ex.status, ex.body = status, []byte(`{"error":`+string(e)+`}`)
	return fmt.Errorf("the response failed (%d)", status)
}
