package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/store"
	"github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// anthropicBody is a Messages request of n user turns, each answered.
func anthropicBody(t testing.TB, n int, stream bool) []byte {
	var msgs []map[string]any
	for i := range n {
		msgs = append(msgs, map[string]any{"role": "user", "content": turnText(i)})
		if i < n-1 {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": []map[string]any{{"type": "text", "text": fmt.Sprintf("reply %d", i+1)}}})
		}
	}
	body, err := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 2000, "stream": stream,
		"system": "You are a careful coding agent.", "messages": msgs})
	require.NoError(t, err)
	return body
}

func openAIBody(t testing.TB, n int, stream bool) []byte {
	msgs := []map[string]any{{"role": "system", "content": "You are a careful coding agent."}}
	for i := range n {
		msgs = append(msgs, map[string]any{"role": "user", "content": turnText(i)})
		if i < n-1 {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": fmt.Sprintf("reply %d", i+1)})
		}
	}
	body, err := json.Marshal(map[string]any{"model": "gpt-4o", "max_completion_tokens": 2000, "stream": stream, "messages": msgs})
	require.NoError(t, err)
	return body
}

func post(t testing.TB, url string, body []byte, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, data
}

func TestOverflowIsRecoveredWithOneRetry(t *testing.T) {
	history := func(n int) []anthropic.MessageParam {
		var h []anthropic.MessageParam
		for i := range n {
			h = append(h, anthropic.NewUserMessage(anthropic.NewTextBlock(turnText(i))))
			if i < n-1 {
				h = append(h, anthropic.NewAssistantMessage(anthropic.NewTextBlock(fmt.Sprintf("reply %d", i+1))))
			}
		}
		return h
	}
	t.Run("anthropic", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
		defer cancel()
		r := newRig(t, nil)
		client := anthropic.NewClient(aoption.WithBaseURL(r.srv.URL), aoption.WithAPIKey(testKey), aoption.WithMaxRetries(0))
		r.up.overflowNext = 1
		params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 2000, Messages: history(6)}
		m, err := client.Messages.New(ctx, params)
		require.NoError(t, err, "the client sees the answer, not the overflow")
		assert.Equal(t, "reply 2", m.Content[0].Text)
		got := r.up.agentRequests()
		require.Len(t, got, 2)
		assert.Equal(t, string(r.front.requests()[0].Body), string(got[0].Body), "the first attempt went as sent")
		repl := checkFaithful(t, r.front.requests()[0].Body, got[1].Body)
		require.NotNil(t, repl, "the retry was compacted")
		assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_overflow_retries_total{result="retried"`))
		assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_compactions_total{strategy="structured",trigger="overflow"`))

		// A later turn reuses that compaction without another overflow.
		params.Messages = append(history(6), m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("and now?")))
		_, err = client.Messages.New(ctx, params)
		require.NoError(t, err)
		got = r.up.agentRequests()
		require.Len(t, got, 3)
		later := checkFaithful(t, r.front.requests()[1].Body, got[2].Body)
		require.Len(t, later, len(repl))
		assert.Equal(t, string(repl[0]), string(later[0]))
	})
	t.Run("anthropic twice", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
		defer cancel()
		r := newRig(t, nil)
		client := anthropic.NewClient(aoption.WithBaseURL(r.srv.URL), aoption.WithAPIKey(testKey), aoption.WithMaxRetries(0))
		r.up.overflowNext = 2
		_, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 2000, Messages: history(6)})
		var apiErr *anthropic.Error
		require.ErrorAs(t, err, &apiErr, "a second overflow is the upstream's answer")
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		assert.Contains(t, apiErr.Error(), "prompt is too long")
		assert.Len(t, r.up.agentRequests(), 2, "one retry, no more")
	})
	t.Run("openai streamed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
		defer cancel()
		r := newRig(t, func(o *Options) { o.CompactionModel = "gpt-4.1-mini" })
		client := openai.NewClient(ooption.WithBaseURL(r.srv.URL+"/v1"), ooption.WithAPIKey("sk-test-openai-key-123"), ooption.WithMaxRetries(0))
		r.up.overflowNext = 1
		msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a careful coding agent.")}
		for i := range 6 {
			msgs = append(msgs, openai.UserMessage(turnText(i)))
			if i < 5 {
				msgs = append(msgs, openai.AssistantMessage(fmt.Sprintf("reply %d", i+1)))
			}
		}
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		require.NoError(t, stream.Err())
		require.NotEmpty(t, acc.Choices)
		assert.Equal(t, "reply 2", acc.Choices[0].Message.Content)
		got := r.up.agentRequests()
		require.Len(t, got, 2)
		require.NotNil(t, checkFaithful(t, r.front.requests()[0].Body, got[1].Body))
		assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_overflow_retries_total{result="retried"`))
	})
}

func TestStreamIsNotBuffered(t *testing.T) {
	for _, tc := range []struct {
		name, path, first, last string
		body                    func(testing.TB, int, bool) []byte
	}{
		{"anthropic", "/v1/messages", "event: message_start", "event: message_stop", anthropicBody},
		{"openai", "/v1/chat/completions", `"object":"chat.completion.chunk"`, "data: [DONE]", openAIBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil)
			r.up.hold, r.up.held = make(chan struct{}), make(chan bool, 1)
			req, err := http.NewRequest(http.MethodPost, r.srv.URL+tc.path, bytes.NewReader(tc.body(t, 2, true)))
			require.NoError(t, err)
			req.Header.Set("X-Api-Key", testKey)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			br := bufio.NewReader(resp.Body)
			var seen strings.Builder
			for !strings.Contains(seen.String(), tc.first) {
				line, err := br.ReadString('\n')
				require.NoError(t, err, "the first event never arrived; got %q", seen.String())
				seen.WriteString(line)
			}
			// Only now may the upstream send the rest.
			close(r.up.hold)
			rest, err := io.ReadAll(br)
			require.NoError(t, err)
			assert.True(t, <-r.up.held, "the upstream gave up waiting: the first event was held back")
			assert.Contains(t, string(rest), tc.last)
		})
	}
}

func TestOtherEndpointsPassUntouched(t *testing.T) {
	r := newRig(t, nil)
	body := []byte(`{"model":"claude-sonnet-4-5",  "messages":[{"role":"user","content":"hi"}], "x":1}`)
	req, err := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/messages/count_tokens?beta=true", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", testKey)
	req.Header.Set("Anthropic-Beta", "token-counting-2024-11-01")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "gone")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(data), `"echo":{"model"`)

	resp, err = http.Get(r.srv.URL + "/v1/models?limit=5")
	require.NoError(t, err)
	resp.Body.Close()

	other := r.up.otherRequests()
	require.Len(t, other, 2)
	assert.Equal(t, string(body), string(other[0].Body))
	assert.Equal(t, "/v1/messages/count_tokens", other[0].Path)
	assert.Equal(t, "beta=true", other[0].Query)
	assert.Equal(t, testKey, other[0].Header.Get("X-Api-Key"))
	assert.Equal(t, "token-counting-2024-11-01", other[0].Header.Get("Anthropic-Beta"))
	assert.Empty(t, other[0].Header.Get("X-Hop"), "hop-by-hop headers are dropped")
	assert.Empty(t, other[0].Header.Get("X-Forwarded-For"), "the upstream sees the agent's request")
	assert.Equal(t, "/v1/models", other[1].Path)
	assert.Equal(t, "limit=5", other[1].Query)
	assert.Empty(t, r.up.agentRequests())
}

func TestUnparsedAndOversizedAreForwardedUntouched(t *testing.T) {
	r := newRig(t, func(o *Options) { o.MaxBodyBytes = 4096 })
	broken := []byte(`{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}`)
	post(t, r.srv.URL+"/v1/messages", broken, nil)
	big := anthropicBody(t, 3, false)
	require.Greater(t, len(big), 4096)
	resp, _ := post(t, r.srv.URL+"/v1/messages", big, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	other, agent := r.up.otherRequests(), r.up.agentRequests()
	require.Len(t, other, 1, "the broken body reaches the upstream, which judges it")
	assert.Equal(t, string(broken), string(other[0].Body))
	require.Len(t, agent, 1)
	assert.Equal(t, string(big), string(agent[0].Body))
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="unparsed"`))
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="oversized"`))
}

func TestUpstreamDownAnswersInTheAPIsShape(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	logs := &syncBuffer{}
	r := newRig(t, func(o *Options) {
		o.Upstream = &url.URL{Scheme: "http", Host: addr}
		o.Logger = newJSONLogger(logs)
	})
	resp, data := post(t, r.srv.URL+"/v1/messages", anthropicBody(t, 1, false), map[string]string{"X-Api-Key": testKey})
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	var a struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(data, &a), "%s", data)
	assert.Equal(t, "error", a.Type)
	assert.Equal(t, "api_error", a.Error.Type)
	assert.Contains(t, a.Error.Message, "upstream could not be reached")

	resp, data = post(t, r.srv.URL+"/v1/chat/completions", openAIBody(t, 1, false), map[string]string{"Authorization": "Bearer " + testKey})
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	var o struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(data, &o), "%s", data)
	assert.Equal(t, "bad_gateway", o.Error.Code)
	assert.Contains(t, o.Error.Message, "upstream could not be reached")
	assert.NotContains(t, logs.String(), testKey)
	assert.Contains(t, logs.String(), "upstream request failed")
}

func TestCredentialsAndContentNeverLogged(t *testing.T) {
	const bearer = "sk-ant-oat01-oauth-SECRET-token-9d8e7f"
	r := newRig(t, nil) // debug level
	r.up.overflowNext = 1
	headers := map[string]string{"Authorization": "Bearer " + bearer, "X-Api-Key": testKey, "Anthropic-Beta": "oauth-2025-04-20"}
	// Over the threshold, then an overflow: the gate, the summary calls,
	// the overflow recovery and the retry all run and log.
	resp, _ := post(t, r.srv.URL+"/v1/messages", anthropicBody(t, 12, false), headers)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = post(t, r.srv.URL+"/v1/chat/completions", openAIBody(t, 12, true), headers)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	logs := r.logs.String()
	require.Contains(t, logs, `"msg":"compacted"`, "the test must exercise the logging paths")
	require.Contains(t, logs, "overflow")
	for _, secret := range []string{bearer, testKey, "failing case", "careful coding agent"} {
		assert.NotContains(t, logs, secret)
	}
	sums := r.up.summaryRequests()
	require.NotEmpty(t, sums)
	assert.Equal(t, "Bearer "+bearer, sums[0].Header.Get("Authorization"), "the summary call carries the client's own credentials")
	assert.Equal(t, "oauth-2025-04-20", sums[0].Header.Get("Anthropic-Beta"))
}

// contended is a memory store that reports when a request finds the
// conversation locked.
type contended struct {
	*store.Memory
	locked chan struct{}
	once   sync.Once
}

func (c *contended) Lock(ctx context.Context, conv string, lease time.Duration) (store.Lock, error) {
	l, err := c.Memory.Lock(ctx, conv, lease)
	if errors.Is(err, store.ErrLocked) {
		c.once.Do(func() { close(c.locked) })
	}
	return l, err
}

func TestConcurrentRequestsCompactOnce(t *testing.T) {
	st := &contended{Memory: store.NewMemory(), locked: make(chan struct{})}
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	blocking := host.StrategyFunc(func(ctx context.Context, _ plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		if calls.Add(1) == 1 {
			close(entered)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &abi.SummarizeResponse{Summary: fmt.Sprintf("summary of %d messages", len(req.Messages))}, nil
	})
	cfg := smallWindow
	cfg.Strategy, cfg.Fallbacks = "blocking", []string{}
	r := newRig(t, func(o *Options) {
		o.Store, o.Config, o.Offline = st, cfg, true
		o.EngineOptions = []host.Option{host.WithStrategy("blocking", blocking)}
		o.LockWait = 5 * time.Minute
	})
	body := anthropicBody(t, 12, false)
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 1 {
				<-entered // the first request is compacting
			}
			req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/messages", bytes.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				statuses[i] = resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	select {
	case <-st.locked:
	case <-time.After(5 * time.Minute): // a hang guard
		t.Log(r.logs.String())
		t.Fatal("the second request never found the conversation locked")
	}
	close(release)
	wg.Wait()
	assert.Equal(t, []int{200, 200}, statuses)
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, "compact_host_proxy_compactions_total"), "one compaction for both requests")
	got := r.up.agentRequests()
	require.Len(t, got, 2)
	assert.Equal(t, string(got[0].Body), string(got[1].Body), "the second request carries the first one's compaction")
	assert.Contains(t, string(got[0].Body), "summary of")
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="compacted"`))
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="spliced"`))
}

// failing is a store whose backend is down.
type failing struct{ *store.Memory }

func (*failing) Latest(context.Context, string) (*store.Record, error) {
	return nil, store.ErrUnavailable
}
func (*failing) Lock(context.Context, string, time.Duration) (store.Lock, error) {
	return nil, store.ErrUnavailable
}
func (*failing) Put(context.Context, *store.Record) error { return store.ErrUnavailable }

func TestStoreDownStillCompacts(t *testing.T) {
	r := newRig(t, func(o *Options) { o.Store = &failing{store.NewMemory()} })
	sent := anthropicBody(t, 12, false)
	resp, _ := post(t, r.srv.URL+"/v1/messages", sent, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	assert.NotNil(t, checkFaithful(t, sent, got[0].Body))
	assert.Positive(t, metricValue(t, r.srv.URL, "compact_host_proxy_store_errors_total"))
}

func TestStrategyFailureForwardsTheOriginal(t *testing.T) {
	broken := host.StrategyFunc(func(context.Context, plugin.Services, *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
		return nil, errors.New("strategy exploded")
	})
	cfg := smallWindow
	cfg.Strategy, cfg.Fallbacks = "broken", []string{}
	// A window the engine cannot reach by the emergency path either:
	// the emergency cut is what follows a failed strategy.
	r := newRig(t, func(o *Options) {
		o.Config, o.Offline = cfg, true
		o.EngineOptions = []host.Option{host.WithStrategy("broken", broken)}
	})
	sent := anthropicBody(t, 12, false)
	resp, _ := post(t, r.srv.URL+"/v1/messages", sent, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	// The engine's answer to a failed strategy is its emergency path,
	// which still produces a valid, byte-faithful rewrite.
	repl := checkFaithful(t, sent, got[0].Body)
	require.NotNil(t, repl)
	assert.Contains(t, string(repl[0]), "emergency")
}

func TestUnreadableConversationIsForwardedAndNotQuoted(t *testing.T) {
	r := newRig(t, nil)
	// Valid JSON the scanner splits, but a content the reader refuses,
	// in a request large enough to need the reader.
	body := anthropicBody(t, 12, false)
	bad := bytes.Replace(body, []byte(`"content":"Turn 3:`), []byte(`"content":{"secret-marker":1},"x":"Turn 3:`), 1)
	require.NotEqual(t, body, bad)
	resp, _ := post(t, r.srv.URL+"/v1/messages", bad, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := r.up.agentRequests()
	require.Len(t, got, 1)
	assert.Equal(t, string(bad), string(got[0].Body), "forwarded as it came")
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="fallback"`))
	assert.NotContains(t, r.logs.String(), "secret-marker")
}
