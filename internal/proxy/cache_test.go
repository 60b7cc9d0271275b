package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/cost"
)

// clock is a settable clock shared by the proxy and the upstream.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// cachingUpstream is a loopback Anthropic Messages API that bills its
// prompt cache as the provider does: a request reads the longest prefix
// (system prompt and messages, cache_control markers aside, a string
// content the same as one text block) that a request within the last
// five minutes sent, and writes the rest. Summary calls get a summary:
// the strategies' (to the compaction model, or with their system prompt)
// and the proxy's own over the cached prompt, whose appended instruction
// is fresh input.
type cachingUpstream struct {
	clk *clock
	srv *httptest.Server

	mu    sync.Mutex
	seen  map[[32]byte]seenPrefix
	calls int
	// agent and cached are the bodies of the agent's requests and of the
	// summary calls over the cached prompt, with the usage billed.
	agent, cached []billed
	fresh         int
	// failCached and failFresh refuse the summary calls of each kind;
	// freshTries counts the strategies' calls, refused or not.
	failCached, failFresh bool
	freshTries            int
}

type seenPrefix struct {
	at     time.Time
	tokens int
}

type billed struct {
	body               []byte
	read, write, fresh int
}

func newCachingUpstream(t *testing.T, clk *clock) *cachingUpstream {
	u := &cachingUpstream{clk: clk, seen: map[[32]byte]seenPrefix{}}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

// cacheKey is a message as the cache keys it: its content, without the
// markers that only say where to cache.
func cacheKey(raw []byte) []byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	var strip func(any) any
	strip = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			delete(t, "cache_control")
			for k, e := range t {
				t[k] = strip(e)
			}
			if c, ok := t["content"].(string); ok {
				t["content"] = []any{map[string]any{"type": "text", "text": c}}
			}
		case []any:
			for i := range t {
				t[i] = strip(t[i])
			}
		}
		return v
	}
	out, _ := json.Marshal(strip(v))
	return out
}

// summaryText is what every summary call answers.
const summaryText = "## Active Task\n> step 1\n\n## Next Step\nFix the parser.\n\n## Key Decisions & Rationale\nNone.\n\n" +
	"## Files & Artifacts\n- parser.go\n\n## Constraints & Requirements\nNone.\n\n## Pending Items\nNone.\n\n## Session Narrative\nEarlier turns were about the parser."

func (u *cachingUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/chat/completions") {
		u.serveChat(w, r)
		return
	}
	var req struct {
		Model    string            `json:"model"`
		Stream   bool              `json:"stream"`
		System   json.RawMessage   `json:"system"`
		Messages []json.RawMessage `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`)
		return
	}
	cachedCall := len(req.Messages) > 0 && bytes.Contains(req.Messages[len(req.Messages)-1], []byte("This conversation is being compacted"))
	freshCall := req.Model == summaryModel || bytes.Contains(req.System, []byte("working memory of a coding agent"))
	u.mu.Lock()
	if freshCall {
		u.freshTries++
	}
	fail := u.failCached && cachedCall || u.failFresh && freshCall
	u.mu.Unlock()
	if fail {
		writeJSON(w, http.StatusInternalServerError, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
		return
	}
	if freshCall {
		u.mu.Lock()
		u.fresh++
		u.mu.Unlock()
		writeJSON(w, http.StatusOK, anthropicMessage(req.Model, summaryText, len(body)/4))
		return
	}
	now := u.clk.Now()
	h := sha256.New()
	h.Write(req.System)
	tokens, read := len(req.System)/4, 0
	msgs := req.Messages
	instruction := 0
	if cachedCall {
		// The instruction is sent once: not cached.
		instruction = len(msgs[len(msgs)-1]) / 4
		msgs = msgs[:len(msgs)-1]
	}
	u.mu.Lock()
	type prefix struct {
		k      [32]byte
		tokens int
	}
	var prefixes []prefix
	for _, m := range msgs {
		key := cacheKey(m)
		h.Write(key)
		tokens += len(key) / 4
		var k [32]byte
		copy(k[:], h.Sum(nil))
		prefixes = append(prefixes, prefix{k, tokens})
		if at, ok := u.seen[k]; ok && now.Sub(at.at) <= cost.TTL5m {
			read = at.tokens
		}
	}
	for _, p := range prefixes {
		if at, ok := u.seen[p.k]; ok {
			// A read keeps the entry, and its size, alive.
			p.tokens = at.tokens
		}
		u.seen[p.k] = seenPrefix{now, p.tokens}
	}
	u.calls++
	turn := u.calls
	b := billed{body: body, read: read, write: tokens - read, fresh: 3 + instruction}
	if cachedCall {
		u.cached = append(u.cached, b)
	} else {
		u.agent = append(u.agent, b)
	}
	u.mu.Unlock()
	usage := fmt.Sprintf(`"input_tokens":%d,"cache_read_input_tokens":%d,"cache_creation_input_tokens":%d`, b.fresh, b.read, b.write)
	if cachedCall {
		writeJSON(w, http.StatusOK, fmt.Sprintf(`{"id":"msg_%d","type":"message","role":"assistant","model":%s,"content":[{"type":"text","text":%s}],"stop_reason":"end_turn","stop_sequence":null,"usage":{%s,"output_tokens":120}}`,
			turn, quote(req.Model), quote(summaryText), usage))
		return
	}
	text := fmt.Sprintf("reply %d: ", turn) + strings.Repeat("the parser change is in place and tested. ", 28)
	if !req.Stream {
		writeJSON(w, http.StatusOK, fmt.Sprintf(`{"id":"msg_%d","type":"message","role":"assistant","model":%s,"content":[{"type":"text","text":%s}],"stop_reason":"end_turn","stop_sequence":null,"usage":{%s,"output_tokens":300}}`,
			turn, quote(req.Model), quote(text), usage))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_%d","type":"message","role":"assistant","model":%s,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{%s,"output_tokens":1}}}`, turn, quote(req.Model), usage))
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%s}}`, quote(text)))
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":300}}`)
	ev("message_stop", `{"type":"message_stop"}`)
}

// agentScript is a client that keeps its whole history and sends it with
// each new user message, every third request streamed.
type agentScript struct {
	t       *testing.T
	url     string
	key     string
	msgs    []map[string]any
	n       int
	compact func() float64
}

const cacheSystem = "You are a careful coding agent. Use the tools you are given; answer tersely."

func (a *agentScript) send() {
	a.t.Helper()
	a.n++
	a.msgs = append(a.msgs, map[string]any{"role": "user", "content": fmt.Sprintf("step %d: ", a.n) + strings.Repeat("please read the next part of parser.go and fix it. ", 8)})
	body, err := json.Marshal(map[string]any{
		"model": "claude-sonnet-4-5", "max_tokens": 1000, "stream": a.n%3 == 0,
		"system":   []map[string]any{{"type": "text", "text": cacheSystem, "cache_control": map[string]string{"type": "ephemeral"}}},
		"messages": a.msgs,
	})
	require.NoError(a.t, err)
	req, err := http.NewRequest(http.MethodPost, a.url+"/v1/messages", bytes.NewReader(body))
	require.NoError(a.t, err)
	req.Header.Set("x-api-key", a.key)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	require.Equal(a.t, http.StatusOK, resp.StatusCode, "%s", data)
	// The reply's text, from the message or the stream's delta.
	var text string
	if a.n%3 == 0 {
		for _, line := range strings.Split(string(data), "\n") {
			var ev struct {
				Delta struct {
					Text string `json:"text"`
				} `json:"delta"`
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(d), &ev) == nil {
				text += ev.Delta.Text
			}
		}
	} else {
		var m struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		require.NoError(a.t, json.Unmarshal(data, &m))
		text = m.Content[0].Text
	}
	require.NotEmpty(a.t, text)
	a.msgs = append(a.msgs, map[string]any{"role": "assistant", "content": text})
}

// admin GETs an admin endpoint with the metrics token and the tenant's
// key.
func admin(t *testing.T, base, path, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+AdminPrefix+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer admin-secret")
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

func metric(t *testing.T, base, series string) float64 {
	t.Helper()
	_, data := admin(t, base, "metrics", "")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, series+" ") {
			var v float64
			fmt.Sscan(strings.Fields(line)[1], &v)
			return v
		}
	}
	return 0
}

// A scripted conversation through the proxy against an upstream that
// bills the cache from the prefixes it has seen, on an injected clock:
// its first request misses (cold start), an edited earlier message
// misses (prefix changed), a 10-minute pause outlives the 5-minute cache
// (TTL expired) and, under the cache-aware policy, is where the proxy
// compacts, at half the budget; pauses under the TTL miss nothing. The
// threshold policy, on the same script, does not compact at the pause.
func TestCacheAwareCompactsAtTheExpiredGap(t *testing.T) {
	for _, policy := range []string{host.PolicyCacheAware, host.PolicyThreshold} {
		t.Run(policy, func(t *testing.T) {
			clk := &clock{t: time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)}
			up := newCachingUpstream(t, clk)
			u, err := url.Parse(up.srv.URL)
			require.NoError(t, err)
			cfg := smallWindow
			cfg.Policy = policy
			p, err := New(Options{Upstream: u, Config: cfg, Registry: registry, CompactionModel: summaryModel, Now: clk.Now,
				MetricsToken: "admin-secret", Logger: newJSONLogger(io.Discard)})
			require.NoError(t, err)
			t.Cleanup(func() { p.Close() })
			srv := httptest.NewServer(p)
			t.Cleanup(srv.Close)
			misses := func(reason string) float64 {
				return metric(t, srv.URL, `compact_host_proxy_cache_misses_total{reason="`+reason+`"}`)
			}
			compactions := func(trigger string) float64 {
				return metric(t, srv.URL, `compact_host_proxy_compactions_total{strategy="structured",trigger="`+trigger+`"}`)
			}
			a := &agentScript{t: t, url: srv.URL, key: "sk-ant-tenant-a"}

			a.send()
			assert.Equal(t, 1.0, misses(missColdStart))
			// Warm, a minute apart, until past half the 7,000 budget.
			for range 7 {
				clk.advance(time.Minute)
				a.send()
			}
			assert.Equal(t, 1.0, misses(missColdStart)+misses(missTTLExpired)+misses(missPrefixChanged)+misses(missCompaction))

			// The agent rewrites its first reply: the cache holds only
			// what comes before it.
			a.msgs[1]["content"] = "reply 1, restated."
			clk.advance(time.Minute)
			a.send()
			assert.Equal(t, 1.0, misses(missPrefixChanged))
			assert.Zero(t, compactions("cache_expired")+compactions("gate"))

			// Four minutes: under the TTL, nothing missed.
			clk.advance(4 * time.Minute)
			a.send()
			assert.Zero(t, misses(missTTLExpired))

			// Ten minutes: the cache expired.
			clk.advance(10 * time.Minute)
			a.send()
			assert.Equal(t, 1.0, misses(missTTLExpired))
			if policy == host.PolicyThreshold {
				assert.Zero(t, compactions("cache_expired")+compactions("gate"), "the threshold policy compacted under its point")
				_, data := admin(t, srv.URL, "conversations", a.key)
				var rep struct {
					Conversations []convCache `json:"conversations"`
				}
				require.NoError(t, json.Unmarshal(data, &rep))
				require.Len(t, rep.Conversations, 1)
				assert.Equal(t, a.n-1, rep.Conversations[0].Growth.Gaps, "every pause seen")
				assert.Equal(t, 1, rep.Conversations[0].Growth.Expired, "the ten-minute pause")
				return
			}
			assert.Equal(t, 1.0, compactions("cache_expired"), "no compaction at the expired gap")
			up.mu.Lock()
			assert.Empty(t, up.cached, "a cold cache resent for its summary")
			up.mu.Unlock()

			// The stored compaction is spliced into the next request,
			// whose prefix is the one just sent: warm.
			clk.advance(time.Minute)
			a.send()
			assert.Equal(t, 1.0, misses(missTTLExpired))
			assert.Zero(t, misses(missCompaction))

			// Growing warm to the cache-aware policy's point: the warm
			// compaction is a miss of its own.
			for i := 0; compactions("gate") == 0; i++ {
				require.Less(t, i, 40, "no warm compaction")
				clk.advance(time.Minute)
				a.send()
			}
			assert.Equal(t, 1.0, misses(missCompaction))
			// Warm, but a fresh call to the cheaper compaction model costs
			// less than the conversation's own over the cached prompt.
			up.mu.Lock()
			assert.Empty(t, up.cached, "the dearer summary call was made")
			up.mu.Unlock()

			// The report: the asking tenant's conversation, with its
			// misses and bill; none for another tenant; the admin token is
			// needed.
			status, data := admin(t, srv.URL, "conversations", a.key)
			require.Equal(t, http.StatusOK, status, "%s", data)
			var rep struct {
				Conversations []convCache `json:"conversations"`
			}
			require.NoError(t, json.Unmarshal(data, &rep))
			require.Len(t, rep.Conversations, 1)
			c := rep.Conversations[0]
			assert.Equal(t, map[string]int{missColdStart: 1, missPrefixChanged: 1, missTTLExpired: 1, missCompaction: 1}, c.Misses)
			assert.Equal(t, a.n, c.Requests)
			assert.Equal(t, 2, c.Compactions)
			// The growth the gate folds by: every pause but those before
			// the two compacted requests, whose growth what they freed hides.
			assert.Equal(t, a.n-3, c.Growth.Gaps)
			assert.Zero(t, c.Growth.Expired, "the expired pause led to a compacted request")
			assert.Positive(t, c.Growth.Tokens)
			assert.Equal(t, "5m", c.TTL)
			assert.Positive(t, c.Bill.CacheRead)
			assert.Positive(t, c.Bill.USD)
			assert.Equal(t, 300*a.n, c.Bill.Output, "every answer's output, streamed or not")

			status, data = admin(t, srv.URL, "conversations/"+c.ID, a.key)
			require.Equal(t, http.StatusOK, status, "%s", data)
			status, _ = admin(t, srv.URL, "conversations/"+c.ID, "sk-ant-tenant-b")
			assert.Equal(t, http.StatusNotFound, status)
			status, data = admin(t, srv.URL, "conversations", "sk-ant-tenant-b")
			require.Equal(t, http.StatusOK, status)
			assert.JSONEq(t, `{"conversations":[]}`, string(data))
			resp, err := http.Get(srv.URL + AdminPrefix + "conversations")
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		})
	}
}

// The usage of each API, whole and streamed, as billed.
func TestUsageTapReadsEveryAPI(t *testing.T) {
	for _, tc := range []struct {
		name, kind, ctype, body string
		want                    cost.Request
	}{
		{"anthropic", KindAnthropic, "application/json",
			`{"type":"message","usage":{"input_tokens":3,"cache_read_input_tokens":900,"cache_creation_input_tokens":100,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":100},"output_tokens":7}}`,
			cost.Request{Input: 3, CacheRead: 900, CacheWrite1h: 100, Output: 7}},
		{"anthropic stream", KindAnthropic, "text/event-stream",
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"cache_read_input_tokens\":900,\"cache_creation_input_tokens\":100,\"output_tokens\":1}}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":40}}\n\n",
			cost.Request{Input: 3, CacheRead: 900, CacheWrite5m: 100, Output: 40}},
		{"chat", KindOpenAI, "application/json",
			`{"object":"chat.completion","usage":{"prompt_tokens":2000,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":1536}}}`,
			cost.Request{Input: 464, CacheRead: 1536, Output: 9}},
		{"chat stream", KindOpenAI, "text/event-stream",
			"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":2000,\"completion_tokens\":9,\"prompt_tokens_details\":{\"cached_tokens\":1024}}}\n\ndata: [DONE]\n\n",
			cost.Request{Input: 976, CacheRead: 1024, Output: 9}},
		{"responses stream", kindResponses, "text/event-stream",
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":5000,\"input_tokens_details\":{\"cached_tokens\":4096},\"output_tokens\":30}}}\n\n",
			cost.Request{Input: 904, CacheRead: 4096, Output: 30}},
		{"gemini array", KindGemini, "application/json",
			`[{"candidates":[]},{"usageMetadata":{"promptTokenCount":3000,"cachedContentTokenCount":2000,"candidatesTokenCount":12}}]`,
			cost.Request{Input: 1000, CacheRead: 2000, Output: 12}},
		{"gemini sse", KindGemini, "text/event-stream",
			"data: {\"usageMetadata\":{\"promptTokenCount\":3000,\"candidatesTokenCount\":4}}\r\n\r\ndata: {\"usageMetadata\":{\"promptTokenCount\":3000,\"cachedContentTokenCount\":2000,\"candidatesTokenCount\":12}}\r\n\r\n",
			cost.Request{Input: 1000, CacheRead: 2000, Output: 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *cost.Request
			c := newCaches(10, cost.TTL5m, time.Now, prometheusRegistry())
			tr := c.begin("t", "c", tc.kind, "m", nil)
			tap := &usageTap{ReadCloser: io.NopCloser(strings.NewReader(tc.body)), t: tr, stream: strings.HasPrefix(tc.ctype, "text/event-stream")}
			// Read in small pieces: lines cross reads.
			out, err := io.ReadAll(io.LimitReader(oneByteReader{tap}, 1<<20))
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(out), "the bytes pass unchanged")
			require.NoError(t, tap.Close())
			rep := c.report("t", "c")
			require.Len(t, rep, 1)
			got = &cost.Request{Input: rep[0].Bill.Input, CacheRead: rep[0].Bill.CacheRead, CacheWrite5m: rep[0].Bill.CacheWrite5m,
				CacheWrite1h: rep[0].Bill.CacheWrite1h, Output: rep[0].Bill.Output}
			assert.Equal(t, tc.want, *got)
			assert.Equal(t, 1, rep[0].Requests)
		})
	}
}

type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 7 {
		p = p[:7]
	}
	return o.r.Read(p)
}

// Hostile answers: a stream line and a JSON body over their bounds pass
// unchanged and leave no usage; conversations beyond the bound are
// forgotten, oldest first.
func TestCachesAreBounded(t *testing.T) {
	c := newCaches(3, cost.TTL5m, time.Now, prometheusRegistry())
	long := "data: {\"usage\":{\"input_tokens\":" + strings.Repeat(" ", maxUsageLine+10) + "5}}\n\n"
	big := `{"pad":"` + strings.Repeat("x", maxUsageBody) + `","usage":{"input_tokens":5}}`
	for _, tc := range []struct {
		body   string
		stream bool
	}{{long, true}, {big, false}} {
		tr := c.begin("t", "hostile", KindAnthropic, "m", nil)
		tap := &usageTap{ReadCloser: io.NopCloser(strings.NewReader(tc.body)), t: tr, stream: tc.stream}
		out, err := io.ReadAll(tap)
		require.NoError(t, err)
		assert.Equal(t, len(tc.body), len(out))
		assert.LessOrEqual(t, tap.buf.Cap(), maxUsageBody+64<<10)
	}
	rep := c.report("t", "hostile")
	require.Len(t, rep, 1)
	assert.Zero(t, rep[0].Requests, "an unread usage counted")

	for i := range 5 {
		c.begin("t", fmt.Sprint("conv-", i), KindAnthropic, "m", nil).finish(&cost.Request{Input: 1})
	}
	all := c.report("t", "")
	require.Len(t, all, 3)
	assert.Equal(t, "conv-4", all[0].ID)
	assert.Empty(t, c.report("t", "conv-0"))
	assert.Empty(t, c.report("other", ""), "another tenant sees nothing")
}

func prometheusRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// serveChat is the same upstream as OpenAI's Chat Completions, which
// caches every prompt's prefix by itself: a request reads the longest
// prefix of messages a request within five minutes sent, and writes
// nothing.
func (u *cachingUpstream) serveChat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string            `json:"model"`
		Messages []json.RawMessage `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		writeJSON(w, http.StatusBadRequest, `{"error":{"message":"bad request","type":"invalid_request_error"}}`)
		return
	}
	cachedCall := bytes.Contains(req.Messages[len(req.Messages)-1], []byte("This conversation is being compacted"))
	freshCall := req.Model == "gpt-4.1-mini" || bytes.Contains(req.Messages[0], []byte("working memory of a coding agent"))
	now := u.clk.Now()
	h := sha256.New()
	tokens, read := 0, 0
	u.mu.Lock()
	if freshCall {
		u.freshTries++
		u.fresh++
	}
	for _, m := range req.Messages {
		h.Write(m)
		tokens += len(m) / 4
		var k [32]byte
		copy(k[:], h.Sum(nil))
		if at, ok := u.seen[k]; ok && now.Sub(at.at) <= cost.TTL5m {
			read = at.tokens
		}
		u.seen[k] = seenPrefix{now, tokens}
	}
	u.calls++
	turn := u.calls
	b := billed{body: body, read: read, fresh: tokens - read}
	switch {
	case cachedCall:
		u.cached = append(u.cached, b)
	case !freshCall:
		u.agent = append(u.agent, b)
	}
	u.mu.Unlock()
	text := fmt.Sprintf("reply %d: ", turn) + strings.Repeat("the parser change is in place and tested. ", 28)
	if cachedCall || freshCall {
		text = summaryText
	}
	writeJSON(w, http.StatusOK, fmt.Sprintf(`{"id":"chatcmpl-%d","object":"chat.completion","created":1700000000,"model":%s,"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":120,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
		turn, quote(req.Model), quote(text), tokens, tokens+120, read))
}
