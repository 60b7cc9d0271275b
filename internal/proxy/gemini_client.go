package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/provider"
)

// geminiModel asks the summaries of a Gemini conversation of the same
// upstream with the client's own key: one generateContent call, no SDK.
// Everything else a summary call needs (retries, the breaker) is as for
// the other APIs.
type geminiModel struct {
	// endpoint is the generateContent URL of the compaction model, the
	// client's ?key= included when it sent one.
	endpoint string
	model    string
	// header holds the client's x-goog-api-key, when it sent one.
	header     http.Header
	client     *http.Client
	timeout    time.Duration
	maxRetries int
}

var _ host.ModelClient = (*geminiModel)(nil)

// maxGeminiAnswer bounds a summary answer read into memory.
const maxGeminiAnswer = 8 << 20

// newGeminiModel builds the summary client of a Gemini request to path
// (".../models/<model>:generateContent") on the proxy's upstream.
func (x *exchange) newGeminiModel(model string) *geminiModel {
	prefix, _, _ := strings.Cut(x.path, "/models/")
	u := *x.p.o.Upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + prefix + "/models/" + model + ":generateContent"
	u.RawPath = ""
	if x.geminiKey != "" {
		u.RawQuery = url.Values{"key": {x.geminiKey}}.Encode()
	} else {
		u.RawQuery = ""
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if v := x.header.Values("X-Goog-Api-Key"); len(v) > 0 {
		h["X-Goog-Api-Key"] = append([]string(nil), v...)
	}
	timeout, retries := x.p.o.ProviderTimeout, x.p.o.ProviderMaxRetries
	if timeout <= 0 {
		timeout = provider.DefaultTimeout
	}
	switch {
	case retries == 0:
		retries = provider.DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	return &geminiModel{endpoint: u.String(), model: model, header: h,
		client: &http.Client{Transport: x.p.o.Transport}, timeout: timeout, maxRetries: retries}
}

func (g *geminiModel) Model() string { return g.model }

// Complete asks for one answer; a 429 or 5xx answer, or a failed
// connection, is tried again up to maxRetries times.
func (g *geminiModel) Complete(ctx context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	body, err := geminiCompleteBody(req)
	if err != nil {
		return nil, err
	}
	wait := 500 * time.Millisecond
	for attempt := 0; ; attempt++ {
		resp, retry, err := g.attempt(ctx, body)
		if err == nil || !retry || attempt >= g.maxRetries {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func (g *geminiModel) attempt(ctx context.Context, body []byte) (_ *abi.CompleteResponse, retry bool, _ error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, g.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	hr.Header = g.header.Clone()
	resp, err := g.client.Do(hr)
	if err != nil {
		// The URL may hold the key: the error names the model, not the URL.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, ctx.Err() == nil, fmt.Errorf("gemini summary call (model %s): %w", g.model, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxGeminiAnswer+1))
	if err != nil {
		return nil, true, fmt.Errorf("gemini summary call (model %s): reading the answer: %w", g.model, err)
	}
	if len(data) > maxGeminiAnswer {
		return nil, false, fmt.Errorf("gemini summary call (model %s): the answer is over %d bytes", g.model, maxGeminiAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		retry := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		return nil, retry, fmt.Errorf("gemini summary call (model %s): status %d: %.300s", g.model, resp.StatusCode, data)
	}
	var answer struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text    string `json:"text"`
					Thought bool   `json:"thought"`
				} `json:"parts"`
			} `json:"content"`
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
		UsageMetadata struct {
			PromptTokenCount        int `json:"promptTokenCount"`
			CandidatesTokenCount    int `json:"candidatesTokenCount"`
			CachedContentTokenCount int `json:"cachedContentTokenCount"`
		} `json:"usageMetadata"`
		ModelVersion string `json:"modelVersion"`
	}
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, false, fmt.Errorf("gemini summary call (model %s): the answer is not a generateContent response: %w", g.model, err)
	}
	var text strings.Builder
	reason := ""
	if len(answer.Candidates) > 0 {
		reason = answer.Candidates[0].FinishReason
		for _, p := range answer.Candidates[0].Content.Parts {
			if !p.Thought {
				text.WriteString(p.Text)
			}
		}
	}
	u := answer.UsageMetadata
	usage := abi.Usage{InputTokens: u.PromptTokenCount - u.CachedContentTokenCount, OutputTokens: u.CandidatesTokenCount,
		CacheReadTokens: u.CachedContentTokenCount}
	got := answer.ModelVersion
	if got == "" {
		got = g.model
	}
	if strings.TrimSpace(text.String()) == "" {
		return nil, false, &provider.EmptyCompletionError{Provider: "gemini", Model: got, StopReason: reason, Usage: usage}
	}
	return &abi.CompleteResponse{Text: text.String(), Usage: usage, Model: got}, false, nil
}

// geminiCompleteBody is the generateContent request of a summary call.
func geminiCompleteBody(req *abi.CompleteRequest) ([]byte, error) {
	type text struct {
		Text string `json:"text"`
	}
	type content struct {
		Parts []text `json:"parts"`
	}
	doc := struct {
		SystemInstruction *content       `json:"systemInstruction,omitempty"`
		Contents          []any          `json:"contents"`
		GenerationConfig  map[string]any `json:"generationConfig,omitempty"`
	}{Contents: formats.GeminiContents(req.Messages)}
	if req.System != "" {
		doc.SystemInstruction = &content{Parts: []text{{req.System}}}
	}
	if req.MaxTokens > 0 {
		doc.GenerationConfig = map[string]any{"maxOutputTokens": req.MaxTokens}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
