package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/host/provider"
	"github.com/compact-host/compact-host/plugins/structured"
)

// A summary call that resends the client's own request: while the
// conversation's prompt cache is warm, and when cost.ChooseSummaryCall
// finds it cheaper than the strategy's fresh call to the compaction
// model, the summary is asked of the conversation's own model with the
// request as the previous one went (system, tools, tool_choice, thinking
// and messages byte for byte, with the client's cache_control markers),
// so the provider bills that prompt as cache reads, and one user message
// appended that asks for the summary of the messages before the cut.
// The tools stay (on Anthropic a change to them, to tool_choice or to
// thinking would miss the cache), so the instruction, not the request,
// forbids tool calls. Anthropic Messages and OpenAI Chat Completions, which
// caches a prompt's prefix by itself (no markers).

// maxCacheMarkers is the most cache_control breakpoints an Anthropic
// request may carry.
const maxCacheMarkers = 4

// maxSummaryAnswer bounds the answer of a cached summary call.
const maxSummaryAnswer = 4 << 20

var (
	cacheControlKey = []byte(`"cache_control"`)
	errNoText       = errors.New("the model answered without text")
)

// cachedSummary is the exchange's host.PromptSummarizer. It returns nil,
// nil to leave the compaction to the strategies: another API, a cold or
// unknown cache, a strategy other than the structured one, or a fresh call
// that costs less.
func (x *exchange) cachedSummary(ctx context.Context, req *host.PromptSummaryRequest) (*host.PromptSummary, error) {
	t := x.turn
	if x.kind != KindAnthropic && x.kind != KindOpenAI || x.agentSummary != "" || t == nil || t.Known != "" || t.cached <= 0 || t.sentBefore <= 0 {
		return nil, nil
	}
	if s := x.p.o.Config.Strategy; s != "" && s != host.DefaultStrategy {
		return nil, nil
	}
	own, ok := catalog.Lookup(x.model)
	if !ok || !own.Prices().Known() {
		return nil, nil
	}
	sp := own.Prices()
	if cm, ok := catalog.Lookup(x.compactionModel()); ok && cm.Prices().Known() {
		sp = cm.Prices()
	}
	out, err := scanRequest(x.out)
	if err != nil {
		return nil, nil
	}
	kept := x.outIndex(x.rawIndex(req.FirstKept.ID))
	if kept <= 0 || kept >= len(out.msgs) {
		return nil, nil
	}
	// The prompt the previous request cached, or up to the cut when that
	// is further.
	end := min(max(t.sentBefore, kept), len(out.msgs))
	foldEnd := req.PromptTokens
	if n := out.msgs[len(out.msgs)-1].end; n > 0 {
		foldEnd = int(float64(req.PromptTokens) * float64(out.msgs[end-1].end) / float64(n))
	}
	sc := cost.ChooseSummaryCall(own.Prices(), sp, cost.SummaryShape{Cached: t.cached, Folded: req.FoldedTokens, FoldEnd: foldEnd,
		Summary: req.Summarize.TargetTokens})
	x.log.Debug("summary call", "cached_prompt", sc.Cached, "expected_usd", sc.USD, "cached_tokens", t.cached, "resent_messages", end)
	if !sc.Cached {
		return nil, nil
	}
	body, err := cachedSummaryBody(x.kind, out, end, structured.Instruction(&req.Summarize, req.FirstKept), req.Summarize.TargetTokens)
	if err != nil {
		x.log.Debug("the request cannot be resent for its summary", "err", err)
		return nil, nil
	}
	return x.sendCachedSummary(ctx, body, own.Prices())
}

// outIndex maps an index of the request's own messages to the body as it
// goes, with the stored compaction spliced in; -1 when it was folded.
func (x *exchange) outIndex(raw int) int {
	if x.rec == nil {
		return raw
	}
	if raw < x.rec.FoldedCount {
		return -1
	}
	return raw - x.rec.FoldedCount + x.spliced
}

// outMessages counts the messages of the body as it goes.
func (x *exchange) outMessages() int {
	if x.raw == nil {
		return 0
	}
	if x.rec == nil {
		return len(x.raw.msgs)
	}
	return x.spliced + len(x.raw.msgs) - x.rec.FoldedCount
}

// cachedSummaryBody is the request out, of API kind, with its first end
// messages, as they are, then the instruction as one more user message;
// stream off. An Anthropic request's max_tokens is sized for a summary of
// target tokens (the client's own when it thinks, since its thinking
// budget must fit), and its last resent message gets the client's
// cache_control marker when it has none, so the provider looks the prompt
// up where the previous request cached it. A Chat Completions request
// keeps its token limit (a reasoning model's reasoning counts in it).
func cachedSummaryBody(kind string, out *rawRequest, end int, instruction string, target int) ([]byte, error) {
	b := out.body
	anthropic := kind == KindAnthropic
	marker := lastMarker(b)
	if anthropic && marker == nil {
		return nil, errors.New("the request marks nothing for the cache")
	}
	last := out.msg(end - 1)
	var role struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls json.RawMessage `json:"tool_calls"`
	}
	if err := json.Unmarshal(last, &role); err != nil {
		return nil, err
	}
	if role.Role == "assistant" && (bytes.Contains(role.Content, []byte(`"tool_use"`)) || len(role.ToolCalls) > 0 && string(role.ToolCalls) != "null") {
		return nil, errors.New("the resent messages end with a tool call")
	}
	prefixEnd := out.msgs[end-1].end
	maxTokens := 0 // the client's
	var instr []byte
	var err error
	if anthropic {
		markers := bytes.Count(b[:prefixEnd], cacheControlKey)
		for k, s := range out.fields {
			if k != "messages" && s.start > out.array.start {
				markers += bytes.Count(s.of(b), cacheControlKey)
			}
		}
		if !bytes.Contains(last, cacheControlKey) && markers < maxCacheMarkers {
			if marked, ok := withMarker(last, role.Content, marker); ok {
				last = marked
			}
		}
		if th := out.field("thinking"); th == nil || bytes.Contains(th, []byte(`"disabled"`)) {
			maxTokens = max(2*target, 2048)
			var n int
			if v := out.field("max_tokens"); v != nil && json.Unmarshal(v, &n) == nil && n > 0 {
				maxTokens = min(maxTokens, n)
			}
		}
		instr, err = json.Marshal(map[string]any{"role": "user", "content": []map[string]string{{"type": "text", "text": instruction}}})
	} else {
		instr, err = json.Marshal(map[string]string{"role": "user", "content": instruction})
	}
	if err != nil {
		return nil, err
	}

	keys := make([]string, 0, len(out.fields))
	for k := range out.fields {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return out.fields[keys[i]].start < out.fields[keys[j]].start })
	var w bytes.Buffer
	w.Grow(prefixEnd + len(instr) + 256)
	w.WriteByte('{')
	for _, k := range keys {
		if k == "stream_options" {
			continue // allowed only with a stream
		}
		if w.Len() > 1 {
			w.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		w.Write(kb)
		w.WriteByte(':')
		switch k {
		case "messages":
			w.Write(b[out.array.start:out.msgs[end-1].start])
			w.Write(last)
			w.WriteByte(',')
			w.Write(instr)
			w.WriteByte(']')
		case "stream":
			w.WriteString("false")
		case "max_tokens":
			if maxTokens > 0 {
				w.WriteString(strconv.Itoa(maxTokens))
			} else {
				w.Write(out.field(k))
			}
		default:
			w.Write(out.field(k))
		}
	}
	w.WriteByte('}')
	return w.Bytes(), nil
}

// lastMarker is the value of the body's last cache_control member, or nil.
func lastMarker(b []byte) []byte {
	i := bytes.LastIndex(b, cacheControlKey)
	if i < 0 {
		return nil
	}
	j := skipSpace(b, i+len(cacheControlKey))
	if j >= len(b) || b[j] != ':' {
		return nil
	}
	j = skipSpace(b, j+1)
	end, err := scanValue(b, j)
	if err != nil || b[j] != '{' {
		return nil
	}
	return b[j:end]
}

// withMarker is the message msg, whose content is content, with marker as
// the cache_control of its last content block; false when that block
// cannot carry one (a thinking block) or the content does not read.
func withMarker(msg, content, marker []byte) ([]byte, bool) {
	content = bytes.TrimSpace(content)
	if len(content) > 0 && content[0] == '"' {
		// A string content is one text block to the provider.
		block, err := json.Marshal(map[string]json.RawMessage{"type": json.RawMessage(`"text"`), "text": content, "cache_control": marker})
		if err != nil {
			return nil, false
		}
		return replaceContent(msg, append(append([]byte{'['}, block...), ']'))
	}
	var blocks []json.RawMessage
	if json.Unmarshal(content, &blocks) != nil || len(blocks) == 0 {
		return nil, false
	}
	lastBlock := bytes.TrimSpace(blocks[len(blocks)-1])
	var kind struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(lastBlock, &kind) != nil || strings.Contains(kind.Type, "thinking") || len(lastBlock) < 3 {
		return nil, false
	}
	i := bytes.LastIndexByte(content, '}')
	marked := make([]byte, 0, len(content)+len(marker)+20)
	marked = append(marked, content[:i]...)
	marked = append(marked, `,"cache_control":`...)
	marked = append(marked, marker...)
	marked = append(marked, content[i:]...)
	return replaceContent(msg, marked)
}

// replaceContent is msg with its content member's value replaced.
func replaceContent(msg, content []byte) ([]byte, bool) {
	m, err := scanConversation(append([]byte(`{"messages":[],`), bytes.TrimSpace(msg)[1:]...), "messages")
	if err != nil {
		return nil, false
	}
	s, ok := m.fields["content"]
	if !ok {
		return nil, false
	}
	out := append([]byte(nil), m.body[len(`{"messages":[],`)-1:s.start]...)
	out[0] = '{'
	out = append(out, content...)
	return append(out, m.body[s.end:]...), true
}

// summaryAnswer is what a summary call's answer is read for: an
// Anthropic message's text blocks, or a chat completion's first choice.
type summaryAnswer struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Choices    []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage wireUsage `json:"usage"`
}

// text is the answer's text, and why it ended.
func (a *summaryAnswer) text() (string, string) {
	if len(a.Choices) > 0 {
		return a.Choices[0].Message.Content, a.Choices[0].FinishReason
	}
	var text strings.Builder
	for _, c := range a.Content {
		if c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	return text.String(), a.StopReason
}

// sendCachedSummary sends body to the request's own endpoint with the
// client's credentials and reads the summary from the answer, priced at
// p from the usage the provider reported.
func (x *exchange) sendCachedSummary(ctx context.Context, body []byte, p cost.Prices) (*host.PromptSummary, error) {
	timeout := x.p.o.ProviderTimeout
	if timeout <= 0 {
		timeout = provider.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := *x.p.o.Upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + x.path
	u.RawQuery = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	cl := &http.Client{Transport: &credentialTransport{base: x.p.o.Transport, header: x.header}}
	began := time.Now()
	resp, err := cl.Do(req)
	if err != nil {
		return nil, fmt.Errorf("summary call: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxSummaryAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("summary call: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("summary call: upstream status %d", resp.StatusCode)
	}
	if len(data) > maxSummaryAnswer {
		return nil, fmt.Errorf("summary call: an answer over %d bytes", maxSummaryAnswer)
	}
	var a summaryAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("summary call: the answer does not read: %w", err)
	}
	text, stop := a.text()
	r := a.Usage.request(x.kind)
	ps := &host.PromptSummary{Summary: text, Model: x.model, CostUSD: r.USD(p),
		Usage: abi.Usage{InputTokens: r.Input, OutputTokens: r.Output, CacheReadTokens: r.CacheRead, CacheWriteTokens: r.CacheWrite5m + r.CacheWrite1h}}
	x.log.Info("cached-prompt summary call", "cache_read_tokens", r.CacheRead, "cache_write_tokens", r.CacheWrite5m+r.CacheWrite1h,
		"input_tokens", r.Input, "output_tokens", r.Output, "cost_usd", ps.CostUSD, "stop_reason", stop, "seconds", time.Since(began).Seconds())
	if strings.TrimSpace(ps.Summary) == "" {
		return ps, fmt.Errorf("summary call: %w (stop reason %q)", errNoText, stop)
	}
	return ps, nil
}
