package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host/formats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Gemini test models: the agent's, and the compaction model the rig
// configures, by which the upstream tells summary calls apart.
const (
	geminiAgentModel   = "gemini-2.5-pro"
	geminiSummaryModel = "gemini-compaction-test"
	geminiTestKey      = "AIzaSy-gemini-test-SECRET-4242"
)

// geminiUpstream is a loopback Gemini API: generateContent,
// streamGenerateContent as SSE (?alt=sse) or as a JSON array. It records
// every request as received and signs every answer's parts with a
// thoughtSignature that names the turn.
type geminiUpstream struct {
	t   testing.TB
	srv *httptest.Server

	mu        sync.Mutex
	agent     []exchangeRecord
	summaries []exchangeRecord
	// overflowNext answers that many agent requests with the API's
	// context-overflow error.
	overflowNext int
}

func newGeminiUpstream(t testing.TB) *geminiUpstream {
	u := &geminiUpstream{t: t}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *geminiUpstream) url() *url.URL {
	v, err := url.Parse(u.srv.URL)
	require.NoError(u.t, err)
	return v
}

func (u *geminiUpstream) records() (agent, summaries []exchangeRecord) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]exchangeRecord(nil), u.agent...), append([]exchangeRecord(nil), u.summaries...)
}

// geminiSignature is the thoughtSignature of turn n's answer.
func geminiSignature(n int) string { return fmt.Sprintf("c2lnbmF0dXJl+/%03d==", n) }

func (u *geminiUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec := exchangeRecord{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	model, ok := geminiModelOf(r.URL.Path)
	if !ok || r.Method != http.MethodPost || !json.Valid(body) {
		http.Error(w, `{"error":{"code":404,"message":"not found","status":"NOT_FOUND"}}`, http.StatusNotFound)
		return
	}
	u.mu.Lock()
	summary := model == geminiSummaryModel
	overflow := false
	if summary {
		u.summaries = append(u.summaries, rec)
	} else {
		u.agent = append(u.agent, rec)
		if u.overflowNext > 0 {
			u.overflowNext--
			overflow = true
		}
	}
	turn := len(u.agent)
	u.mu.Unlock()
	in := len(body) / 4
	if overflow {
		writeJSON(w, http.StatusBadRequest, fmt.Sprintf(`{"error":{"code":400,"message":"The input token count (%d) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, 1048576+in))
		return
	}
	text := fmt.Sprintf("reply %d", turn)
	if summary {
		text = "## Goal\nThe scripted task.\n## Progress\nEarlier turns were about the parser."
	}
	answer := func(text string, last bool) string {
		finish := ""
		if last {
			finish = `,"finishReason":"STOP"`
		}
		return fmt.Sprintf(`{"candidates":[{"content":{"role":"model","parts":[{"text":%s,"thoughtSignature":%s}]}%s,"index":0}],"usageMetadata":{"promptTokenCount":%d,"candidatesTokenCount":5,"totalTokenCount":%d},"modelVersion":%s,"responseId":"resp-%d"}`,
			quote(text), quote(geminiSignature(turn)), finish, in, in+5, quote(model), turn)
	}
	half := len(text) / 2
	switch {
	case strings.HasSuffix(r.URL.Path, ":generateContent"):
		writeJSON(w, http.StatusOK, answer(text, true))
	case r.URL.Query().Get("alt") == "sse":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\r\n\r\n", answer(text[:half], false))
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, "data: %s\r\n\r\n", answer(text[half:], true))
	default:
		// Without alt=sse the stream is one JSON array, element by element.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "[%s\n", answer(text[:half], false))
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, ",\r\n%s]", answer(text[half:], true))
	}
}

// newGeminiRig is a proxy in front of a loopback Gemini upstream.
func newGeminiRig(t testing.TB, edit func(*Options)) (*rig, *geminiUpstream) {
	t.Helper()
	up := newGeminiUpstream(t)
	r := newRig(t, func(o *Options) {
		o.Upstream = up.url()
		o.CompactionModel = geminiSummaryModel
		if edit != nil {
			edit(o)
		}
	})
	return r, up
}

// geminiTurn is what the scripted agent sends at turn i: a user text, and
// every fourth turn a function call with its response inside the turn.
func geminiTurn(i int) []string {
	out := []string{fmt.Sprintf(`{"role":"user","parts":[{"text":%s}]}`, quote(turnText(i)))}
	if i%4 == 1 {
		out = append(out,
			fmt.Sprintf(`{"role":"model","parts":[{"functionCall":{"name":"read_file","args":{"path":"parser_%d.go"}},"thoughtSignature":"Y2FsbC1zaWc=/%d"}]}`, i, i),
			fmt.Sprintf(`{"role":"user","parts":[{"functionResponse":{"name":"read_file","response":{"output":"package parser // file %d"}}}]}`, i))
	}
	return out
}

// geminiBody is a whole request with history as its contents.
func geminiBody(history []string) []byte {
	return []byte(`{"contents":[` + strings.Join(history, ",") + `],` +
		`"systemInstruction":{"parts":[{"text":"You are a careful coding agent."}]},` +
		`"tools":[{"functionDeclarations":[{"name":"read_file","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]}],` +
		`"generationConfig":{"maxOutputTokens":1000,"thinkingConfig":{"includeThoughts":true}},"x_future_field":{"keep":[1,2]}}`)
}

// geminiReplyContent is the model content of a generateContent answer,
// as an agent puts it into its history: its raw bytes.
func geminiReplyContent(t testing.TB, answer []byte) string {
	t.Helper()
	var a struct {
		Candidates []struct {
			Content json.RawMessage `json:"content"`
		} `json:"candidates"`
	}
	require.NoError(t, json.Unmarshal(answer, &a), "%s", answer)
	require.NotEmpty(t, a.Candidates, "%s", answer)
	return string(a.Candidates[0].Content)
}

// checkGeminiConversation checks what the upstream received against what
// the client sent: every request the same bytes outside "contents"; after
// the one compaction, the same replacement prefix in every request and the
// kept contents byte for byte, thought signatures included.
func checkGeminiConversation(t *testing.T, r *rig, up *geminiUpstream, turns int) {
	t.Helper()
	sent := r.front.requests()
	got, sums := up.records()
	require.Len(t, sent, turns)
	require.Len(t, got, turns)
	var first []json.RawMessage
	compactedAt := -1
	for i := range sent {
		assert.Equal(t, sent[i].Path, got[i].Path)
		assert.Equal(t, sent[i].Query, got[i].Query)
		s, g := topLevel(t, sent[i].Body), topLevel(t, got[i].Body)
		for k := range s {
			if k != "contents" {
				assert.Equal(t, string(s[k]), string(g[k]), "turn %d: field %s changed", i, k)
			}
		}
		sc, gc := rawArray(t, "contents", sent[i].Body), rawArray(t, "contents", got[i].Body)
		if bytes.Equal(sent[i].Body, got[i].Body) {
			require.Nil(t, first, "turn %d went uncompacted after turn %d was compacted", i, compactedAt)
			continue
		}
		read, err := formats.Read(bytes.NewReader(got[i].Body), formats.GeminiAPI)
		require.NoError(t, err, "turn %d does not read as a Gemini request", i)
		assert.Empty(t, read.Repaired, "turn %d: a call parted from its response", i)
		// The kept contents are the sent ones' tail, byte for byte.
		var repl []json.RawMessage
		for k := 1; k <= len(gc); k++ {
			if k > len(sc) || string(gc[len(gc)-k]) != string(sc[len(sc)-k]) {
				repl = gc[:len(gc)-k+1]
				break
			}
		}
		require.NotEmpty(t, repl, "turn %d", i)
		if first == nil {
			first, compactedAt = repl, i
			assert.Contains(t, string(repl[len(repl)-1]), "Context compacted")
			continue
		}
		require.Equal(t, len(first), len(repl), "turn %d", i)
		for k := range first {
			assert.Equal(t, string(first[k]), string(repl[k]), "turn %d: replacement content %d differs", i, k)
		}
		// Every signature the client sent in a kept content arrived.
		for _, c := range gc[len(repl):] {
			assert.Contains(t, string(sent[i].Body), string(c))
		}
	}
	require.NotNil(t, first, "the conversation was never compacted")
	assert.Less(t, compactedAt, turns-2, "too few turns after the compaction to show it is reused")
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, "compact_host_proxy_compactions_total"))
	require.NotEmpty(t, sums)
	for _, s := range sums {
		model, _ := geminiModelOf(s.Path)
		assert.Equal(t, geminiSummaryModel, model)
		assert.True(t, s.Header.Get("X-Goog-Api-Key") == geminiTestKey || strings.Contains(s.Query, "key="), "the summary call carries the client's key")
	}
	assert.NotContains(t, r.logs.String(), geminiTestKey)
	t.Logf("compacted at turn %d of %d; %d summary calls", compactedAt, turns, len(sums))
}

// TestGeminiConversation drives a scripted Gemini conversation through
// the proxy, each turn's answer taken into the history as the API gave it;
// the key travels as x-goog-api-key, or as ?key=, with every method.
func TestGeminiConversation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		query  bool
	}{
		{"generateContent", "generateContent", false},
		{"sse with ?key=", "streamGenerateContent?alt=sse", true},
		{"json array stream", "streamGenerateContent", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, up := newGeminiRig(t, nil)
			const turns = 14
			var history []string
			for i := range turns {
				history = append(history, geminiTurn(i)...)
				u := r.srv.URL + "/v1beta/models/" + geminiAgentModel + ":" + tc.method
				if tc.query {
					sep := "?"
					if strings.Contains(u, "?") {
						sep = "&"
					}
					u += sep + "key=" + geminiTestKey
				}
				req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(geminiBody(history)))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				if !tc.query {
					req.Header.Set("X-Goog-Api-Key", geminiTestKey)
				}
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				answer, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", answer)
				want := fmt.Sprintf("reply %d", i+1)
				switch {
				case tc.method == "generateContent":
					history = append(history, geminiReplyContent(t, answer))
				default:
					// A stream's parts are joined into one content, as the SDKs do.
					assert.Contains(t, string(answer), quote(want[:len(want)/2]))
					history = append(history, fmt.Sprintf(`{"role":"model","parts":[{"text":%s,"thoughtSignature":%s}]}`, quote(want), quote(geminiSignature(i+1))))
				}
			}
			checkGeminiConversation(t, r, up, turns)
		})
	}
}

// An overflow answer of the Gemini API is recovered with one compaction
// and one retry; the client sees the retry's answer.
func TestGeminiOverflowRetried(t *testing.T) {
	r, up := newGeminiRig(t, nil)
	up.overflowNext = 1
	var history []string
	for i := range 3 {
		history = append(history, geminiTurn(i)...)
		history = append(history, fmt.Sprintf(`{"role":"model","parts":[{"text":"reply %d"}]}`, i+1))
	}
	history = append(history, geminiTurn(3)...)
	req, err := http.NewRequest(http.MethodPost, r.srv.URL+"/v1beta/models/"+geminiAgentModel+":generateContent", bytes.NewReader(geminiBody(history)))
	require.NoError(t, err)
	req.Header.Set("X-Goog-Api-Key", geminiTestKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", answer)
	agent, sums := up.records()
	require.Len(t, agent, 2, "one request and one retry")
	assert.Less(t, len(agent[1].Body), len(agent[0].Body), "the retry is compacted")
	assert.NotEmpty(t, sums)
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_overflow_retries_total{result="retried"}`))
	_, err = formats.Read(bytes.NewReader(agent[1].Body), formats.GeminiAPI)
	require.NoError(t, err)
}

// The proxy's own errors to a Gemini client are in the Gemini API's
// shape, and a path that is not a conversation passes through.
func TestGeminiErrorsAndPassthrough(t *testing.T) {
	r, up := newGeminiRig(t, nil)
	resp, err := http.Post(r.srv.URL+"/v1beta/models/"+geminiAgentModel+":generateContent", "application/json", strings.NewReader(`{"contents":[`))
	require.NoError(t, err)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// An unparsed body goes on untouched; the upstream answers it.
	agent, _ := up.records()
	require.Len(t, agent, 0, "the fake upstream refuses invalid JSON before recording it")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", answer)

	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1beta/models/"+geminiAgentModel+":generateContent", strings.NewReader(`{"contents":[]}`))
	req.URL.Path = "/v1beta/models/../x:generateContent"
	req.URL.RawPath = "/v1beta/models/%2e%2e/x:generateContent"
	req.Header.Set("X-Goog-Api-Key", geminiTestKey)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(answer, &e), "%s", answer)
	assert.Equal(t, 400, e.Error.Code)
	assert.Equal(t, "INVALID_ARGUMENT", e.Error.Status)
	assert.Contains(t, e.Error.Message, "dot segment")

	for path, want := range map[string]bool{
		"/v1beta/models/gemini-2.5-pro:generateContent":       true,
		"/v1beta/models/gemini-2.5-pro:streamGenerateContent": true,
		"/v1/models/gemini-2.5-pro:generateContent/":          true,
		"/v1beta/models/gemini-2.5-pro:countTokens":           false,
		"/v1beta/models/gemini-2.5-pro":                       false,
		"/v1beta/tunedModels/x:generateContent":               false,
		"/v1beta/models/a/b:generateContent":                  false,
	} {
		_, ok := geminiModelOf(strings.TrimSuffix(path, "/"))
		assert.Equal(t, want, ok, path)
	}
}

// TestNodeSDKGemini drives the official Google Gen AI Node SDK through
// the proxy: every other turn streams (SSE), each answer goes into the
// history as the SDK returns it, thought signatures included.
func TestNodeSDKGemini(t *testing.T) {
	node, dir := nodeClient(t)
	r, up := newGeminiRig(t, nil)
	const turns = 14
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"PROXY_URL=" + r.srv.URL, "KIND=gemini", "TURNS=" + strconv.Itoa(turns), "API_KEY=" + geminiTestKey}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
	sc := bufio.NewScanner(&stdout)
	n := 0
	for sc.Scan() {
		var line struct {
			Turn int    `json:"turn"`
			Text string `json:"text"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "%s", sc.Text())
		assert.Equal(t, n, line.Turn)
		assert.Equal(t, fmt.Sprintf("reply %d", n+1), line.Text)
		n++
	}
	require.Equal(t, turns, n, "stderr: %s", stderr.String())
	checkGeminiConversation(t, r, up, turns)
	agent, _ := up.records()
	for i, rec := range agent {
		assert.Contains(t, string(rec.Body), `"x_future_field":{"keep":[1,2]}`, "request %d: the unknown field", i)
		assert.Equal(t, geminiTestKey, rec.Header.Get("X-Goog-Api-Key"))
		// The SDK picks the API version; the method is the test's.
		if i%2 == 0 {
			assert.True(t, strings.HasSuffix(rec.Path, "/models/"+geminiAgentModel+":streamGenerateContent"), rec.Path)
			assert.Equal(t, "alt=sse", rec.Query)
		} else {
			assert.True(t, strings.HasSuffix(rec.Path, "/models/"+geminiAgentModel+":generateContent"), rec.Path)
		}
	}
	// The latest answers' signatures come back as the upstream gave them.
	last := string(agent[len(agent)-1].Body)
	for k := turns - 3; k < turns; k++ {
		assert.Contains(t, last, quote(geminiSignature(k)), "the signature of answer %d", k)
	}
}

// Gemini CLI's own compression request (its <state_snapshot> system
// prompt and instruction) goes upstream whole; the same history with
// another last message is compacted.
func TestGeminiCLICompressionGoesWhole(t *testing.T) {
	r, up := newGeminiRig(t, nil)
	var history []string
	for i := range 14 {
		history = append(history, geminiTurn(i)...)
		history = append(history, fmt.Sprintf(`{"role":"model","parts":[{"text":"reply %d"}]}`, i+1))
	}
	send := func(body []byte) {
		req, err := http.NewRequest(http.MethodPost, r.srv.URL+"/v1beta/models/"+geminiAgentModel+":generateContent", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("X-Goog-Api-Key", geminiTestKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	compress := append(append([]string(nil), history...),
		`{"role":"user","parts":[{"text":"\n\nFirst, reason in your scratchpad. Then, generate the updated <state_snapshot>."}]}`)
	body := []byte(`{"contents":[` + strings.Join(compress, ",") + `],"systemInstruction":{"parts":[{"text":"You are a specialized system component responsible for distilling chat history into a structured XML <state_snapshot>."}]},"generationConfig":{"maxOutputTokens":1000}}`)
	send(body)
	agent, _ := up.records()
	require.Len(t, agent, 1)
	assert.Equal(t, string(body), string(agent[0].Body), "the agent's own summary request went whole")
	assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="agent_summary",kind="gemini"}`))

	send(geminiBody(append(history, geminiTurn(14)...)))
	agent, _ = up.records()
	require.Len(t, agent, 2)
	assert.Less(t, len(agent[1].Body), len(geminiBody(append(history, geminiTurn(14)...))), "an ordinary request of that size is compacted")
}

// The proxy answers in the shape of the API a request speaks: Gemini's
// for a Gemini key, OpenAI's for OpenAI's /v1/models/<id>.
func TestErrorKindOfGeminiRequests(t *testing.T) {
	r, _ := newGeminiRig(t, nil)
	for _, tc := range []struct {
		path, header, want string
	}{
		{"/v1beta/models/gemini-2.5-pro:countTokens", "X-Goog-Api-Key", KindGemini},
		{"/v1beta/models?key=k", "", KindGemini},
		{"/v1beta/models/gemini-2.5-pro:generateContent", "", KindGemini},
		{"/v1/models/gpt-4o", "Authorization", KindOpenAI},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.header != "" {
			req.Header.Set(tc.header, "k")
		}
		assert.Equal(t, tc.want, r.proxy.errorKind(req), tc.path)
	}
}
