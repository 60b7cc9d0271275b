package formats

import (
	"fmt"
	"io"
	"time"

	"github.com/compact-host/compact-host/host/cost"
)

// maxUsageTokens bounds one recorded token count; no provider reports more.
const maxUsageTokens = 1 << 40

// BilledRequests returns the usage the file records for the model calls
// its agent made, in file order, as the reader found it in the same pass
// over the file. Claude Code records message.usage on every line of a
// response (the last is kept, once per response, its cache writes split
// by TTL from cache_creation) and its subagents' in their progress
// records; Codex records a token_count event after each call
// (last_token_usage, whose input counts the cached part). Other formats
// record no usage: nil, nil.
//
// A record whose usage cannot be read stops the usage there, not the
// session: the calls before it are returned with a *ParseError naming its
// line.
func (s *Session) BilledRequests() ([]cost.Request, error) {
	if s.billing == nil {
		return nil, nil
	}
	return s.billing.reqs, s.billing.err
}

// BilledRequests reads the file in format (ClaudeCode or Codex) and
// returns the usage it records (Session.BilledRequests); a file the
// reader refuses is that error. Other formats record no usage: nil, nil.
func BilledRequests(r io.Reader, format string) ([]cost.Request, error) {
	if format != ClaudeCode && format != Codex {
		return nil, nil
	}
	s, err := Read(r, format)
	if s == nil {
		return nil, err
	}
	reqs, uerr := s.BilledRequests()
	if uerr != nil {
		return reqs, uerr
	}
	return reqs, err
}

// billing collects the recorded usage as a reader reads the records.
type billing struct {
	format string
	reqs   []cost.Request
	err    error
	// Claude Code: response ID -> index in reqs.
	at map[string]int
	// Codex: the model of the latest turn_context, and the latest totals.
	model     string
	lastTotal *codexUsage
}

// codexUsage is a token_count's total or last usage.
type codexUsage struct {
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
}

// startBilling sets up the usage collection of s's reader.
func startBilling(s *Session, format string) *billing {
	s.billing = &billing{format: format, at: map[string]int{}}
	return s.billing
}

// done reports whether the usage stopped at an earlier record.
func (b *billing) done() bool { return b.err != nil }

// fail stops the usage at line n.
func (b *billing) fail(n int, err error) {
	b.err = &ParseError{Line: n, Offset: -1, Format: b.format, Reason: jsonReason(err), Err: err}
}

// claudeCode collects the usage of record rec at line n: an assistant
// line's, or a subagent's response in a progress record.
func (b *billing) claudeCode(rec *ccRecord, n int) {
	if b.done() {
		return
	}
	var m *ccMessage
	thread := "" // the main conversation's; a subagent's calls are a thread of their own
	switch {
	case rec.Type == "assistant" && rec.Message != nil:
		m = rec.Message
	case rec.Type == "progress" && rec.Data != nil && rec.Data.Message != nil && rec.Data.Message.Message != nil:
		m, thread = rec.Data.Message.Message, "agent-"+rec.Data.AgentID
	default:
		return
	}
	fail := func(err error) {
		if rec.Type == "assistant" { // a progress record's usage is only read when it reads
			b.fail(n, fmt.Errorf("message: %v", err))
		}
	}
	var model string
	if err := decodeString(m.Model, &model); len(m.Model) > 0 && err != nil {
		fail(err)
		return
	}
	u := m.Usage
	var split *struct {
		Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
	}
	if u != nil && len(u.CacheCreation) > 0 {
		if err := decodeChecked(u.CacheCreation, &split); err != nil {
			fail(err)
			return
		}
	}
	if u == nil || model == "<synthetic>" {
		return
	}
	write5m, write1h := int64(u.CacheCreationInputTokens), int64(0)
	if c := split; c != nil && c.Ephemeral5m+c.Ephemeral1h > 0 {
		write5m, write1h = c.Ephemeral5m, c.Ephemeral1h
		if rest := int64(u.CacheCreationInputTokens) - write5m - write1h; rest > 0 {
			write5m += rest
		}
	}
	req, err := billed(rec.Timestamp, model, int64(u.InputTokens), int64(u.CacheReadInputTokens), write5m, write1h, int64(u.OutputTokens))
	if err != nil {
		b.fail(n, err)
		return
	}
	req.Thread = thread
	if i, ok := b.at[m.ID]; ok && m.ID != "" {
		req.Time = b.reqs[i].Time // the response's first line is when it began
		b.reqs[i] = req
		return
	}
	b.at[m.ID] = len(b.reqs)
	b.reqs = append(b.reqs, req)
}

// codexTurn notes the model of a turn_context record at line n.
func (b *billing) codexTurn(payload []byte, n int) {
	if b.done() {
		return
	}
	var tc struct {
		Model string `json:"model"`
	}
	if err := decodeChecked(payload, &tc); err != nil {
		b.fail(n, err)
		return
	}
	if tc.Model != "" {
		b.model = tc.Model
	}
}

// codexTokens collects the usage of a token_count event at line n.
func (b *billing) codexTokens(timestamp borrowedRaw, tc *codexTokenCount, n int) {
	if b.done() || tc.Info == nil || tc.Info.Last == nil {
		return
	}
	// Codex repeats a token_count with the same totals when nothing was
	// called in between.
	if len(tc.Info.Total) > 0 {
		var t *codexUsage
		if err := decodeChecked(tc.Info.Total, &t); err != nil {
			b.fail(n, err)
			return
		}
		if t != nil {
			if b.lastTotal != nil && *t == *b.lastTotal {
				return
			}
			b.lastTotal = t
		}
	}
	u := tc.Info.Last
	if u.CachedInputTokens > u.InputTokens {
		b.fail(n, fmt.Errorf("token_count: cached_input_tokens %d exceeds input_tokens %d", u.CachedInputTokens, u.InputTokens))
		return
	}
	req, err := billed(timestamp, b.model, int64(u.InputTokens-u.CachedInputTokens), int64(u.CachedInputTokens), 0, 0, int64(u.OutputTokens))
	if err != nil {
		b.fail(n, err)
		return
	}
	b.reqs = append(b.reqs, req)
}

// billed checks recorded token counts and makes a request of them; the
// time is the record's timestamp, when it reads as one.
func billed(timestamp borrowedRaw, model string, input, read, write5m, write1h, output int64) (cost.Request, error) {
	for _, f := range []struct {
		name string
		n    int64
	}{{"input", input}, {"cache read", read}, {"5-minute cache write", write5m}, {"1-hour cache write", write1h}, {"output", output}} {
		if f.n < 0 || f.n > maxUsageTokens {
			return cost.Request{}, fmt.Errorf("usage: %s tokens %d, outside 0 to 2^40", f.name, f.n)
		}
	}
	req := cost.Request{Model: model, Input: int(input), CacheRead: int(read),
		CacheWrite5m: int(write5m), CacheWrite1h: int(write1h), Output: int(output)}
	var ts string
	if len(timestamp) > 0 {
		if err := decodeString(timestamp, &ts); err != nil {
			return cost.Request{}, err
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
		req.Time = t
	}
	return req, nil
}
