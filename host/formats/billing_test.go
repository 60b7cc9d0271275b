package formats

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/cost"
)

func TestBilledRequestsClaudeCode(t *testing.T) {
	lines := strings.Join([]string{
		// One response written as two lines: the usage of the last counts,
		// the time of the first.
		`{"type":"assistant","timestamp":"2026-02-08T11:00:00Z","message":{"id":"msg_1","model":"claude-sonnet-4-5","usage":{"input_tokens":3,"cache_creation_input_tokens":1000,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":1000},"output_tokens":2}}}`,
		`{"type":"assistant","timestamp":"2026-02-08T11:00:04Z","message":{"id":"msg_1","model":"claude-sonnet-4-5","usage":{"input_tokens":3,"cache_creation_input_tokens":1000,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":1000},"output_tokens":50}}}`,
		`{"type":"user","timestamp":"2026-02-08T11:00:05Z","message":{"role":"user","content":"go on"}}`,
		// No TTL split: the writes are 5-minute ones.
		`{"type":"assistant","timestamp":"2026-02-08T11:07:00Z","message":{"id":"msg_2","model":"claude-sonnet-4-5","usage":{"input_tokens":1,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"output_tokens":10}}}`,
		// A subagent's call, in a progress record.
		`{"type":"progress","timestamp":"2026-02-08T11:08:00Z","data":{"type":"agent_progress","agentId":"a2edb04","message":{"type":"assistant","message":{"id":"msg_3","model":"claude-haiku-4-5","usage":{"input_tokens":10,"output_tokens":5}}}}}`,
		// Claude Code's own notices cost nothing.
		`{"type":"assistant","timestamp":"2026-02-08T11:09:00Z","message":{"id":"x","model":"<synthetic>","usage":{"input_tokens":0,"output_tokens":0}}}`,
	}, "\n")
	got, err := BilledRequests(strings.NewReader(lines), ClaudeCode)
	require.NoError(t, err)
	at := func(s string) time.Time { tm, _ := time.Parse(time.RFC3339, s); return tm }
	assert.Equal(t, []cost.Request{
		{Time: at("2026-02-08T11:00:00Z"), Model: "claude-sonnet-4-5", Input: 3, CacheWrite1h: 1000, Output: 50},
		{Time: at("2026-02-08T11:07:00Z"), Model: "claude-sonnet-4-5", Input: 1, CacheRead: 1000, CacheWrite5m: 200, Output: 10},
		{Time: at("2026-02-08T11:08:00Z"), Model: "claude-haiku-4-5", Thread: "agent-a2edb04", Input: 10, Output: 5},
	}, got)

	_, err = BilledRequests(strings.NewReader(`{"type":"user","message":{"role":"user","content":"hi"}}`+"\n"+`{"type":"assistant","message":{"id":"m","model":"m","usage":{"input_tokens":-4}}}`), ClaudeCode)
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 2, pe.Line)
	assert.Contains(t, err.Error(), "input tokens -4")
}

func TestBilledRequestsCodex(t *testing.T) {
	lines := strings.Join([]string{
		`{"timestamp":"2026-07-06T09:19:00Z","type":"turn_context","payload":{"model":"gpt-5","cwd":"/w"}}`,
		`{"timestamp":"2026-07-06T09:19:29Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":20,"output_tokens":5},"last_token_usage":{"input_tokens":100,"cached_input_tokens":20,"output_tokens":5}}}}`,
		// Repeated with the same totals: no new call.
		`{"timestamp":"2026-07-06T09:19:30Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":20,"output_tokens":5},"last_token_usage":{"input_tokens":100,"cached_input_tokens":20,"output_tokens":5}}}}`,
		`{"timestamp":"2026-07-06T09:19:31Z","type":"event_msg","payload":{"type":"token_count","info":null}}`,
		`{"timestamp":"2026-07-06T09:20:00Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":250,"cached_input_tokens":120,"output_tokens":12},"last_token_usage":{"input_tokens":150,"cached_input_tokens":100,"output_tokens":7}}}}`,
	}, "\n")
	got, err := BilledRequests(strings.NewReader(lines), Codex)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, cost.Request{Time: got[0].Time, Model: "gpt-5", Input: 80, CacheRead: 20, Output: 5}, got[0])
	assert.Equal(t, cost.Request{Time: got[1].Time, Model: "gpt-5", Input: 50, CacheRead: 100, Output: 7}, got[1])
	assert.Equal(t, "2026-07-06T09:20:00Z", got[1].Time.Format(time.RFC3339))

	_, err = BilledRequests(strings.NewReader(`{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":10,"cached_input_tokens":11}}}}`), Codex)
	assert.ErrorContains(t, err, "cached_input_tokens 11 exceeds input_tokens 10")

	got, err = BilledRequests(strings.NewReader(`[]`), OpenAI)
	assert.NoError(t, err)
	assert.Nil(t, got)
}

// Every response of a real Claude Code session is billed once, with the
// usage of its last line; the sums are those the file records.
func TestBilledRequestsClaudeCodeCorpus(t *testing.T) {
	path := corpusPath(t, "claude-code-go-cli.jsonl")
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	got, err := BilledRequests(f, ClaudeCode)
	require.NoError(t, err)

	// The same figures by a plain scan of the file.
	raw, err := os.Open(path)
	require.NoError(t, err)
	defer raw.Close()
	last := map[string]map[string]any{}
	var order []string
	sc := bufio.NewScanner(raw)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var rec struct {
			Type    string `json:"type"`
			Message struct {
				ID    string         `json:"id"`
				Usage map[string]any `json:"usage"`
			} `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Type != "assistant" || rec.Message.Usage == nil {
			continue
		}
		if _, ok := last[rec.Message.ID]; !ok {
			order = append(order, rec.Message.ID)
		}
		last[rec.Message.ID] = rec.Message.Usage
	}
	require.NoError(t, sc.Err())
	require.Len(t, got, len(order))
	var read, write, out float64
	for _, id := range order {
		read += last[id]["cache_read_input_tokens"].(float64)
		write += last[id]["cache_creation_input_tokens"].(float64)
		out += last[id]["output_tokens"].(float64)
	}
	b := cost.BillRequests(cost.Prices{}, got)
	assert.Equal(t, int(read), b.CacheRead)
	assert.Equal(t, int(write), b.CacheWrite5m+b.CacheWrite1h)
	assert.Equal(t, int(out), b.Output)
	assert.Positive(t, b.CacheWrite1h, "Claude Code writes its cache for an hour")
	for _, r := range got {
		assert.False(t, r.Time.IsZero())
		assert.Equal(t, "claude-opus-4-6", r.Model)
	}
}

// The usage the readers collect in their own pass is what the usage
// reader of its own (a second pass over the file, kept below as the
// reference) found, on every corpus file.
func TestBilledRequestsInTheReadersPassCorpus(t *testing.T) {
	var files []string
	for _, folder := range []string{"corpus", "corpus-new"} {
		dir, ok := findShared(folder, "")
		if !ok {
			t.Skipf("../shared/%s not found above the module root; skipping", folder)
		}
		names, err := filepath.Glob(filepath.Join(dir, "*"))
		require.NoError(t, err)
		files = append(files, names...)
	}
	billedFiles := 0
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			format, err := Detect(data[:min(len(data), detectSize)])
			if err != nil {
				t.Skipf("not a session: %v", err)
			}
			s, err := Read(bytes.NewReader(data), format)
			if err != nil {
				t.Skipf("not a session: %v", err)
			}
			got, gotErr := s.BilledRequests()
			want, wantErr := refBilledRequests(bytes.NewReader(data), format)
			require.NoError(t, wantErr)
			require.NoError(t, gotErr)
			assert.Equal(t, want, got)
			if format == ClaudeCode || format == Codex {
				require.NotEmpty(t, got, "a %s file records its usage", format)
				billedFiles++
			}
		})
	}
	assert.GreaterOrEqual(t, billedFiles, 3, "the corpus holds Claude Code and Codex files")
}

// The reader's pass and the reference agree on what stops the usage, and
// the session is read whatever the usage says.
func TestBilledRequestsInTheReadersPassStops(t *testing.T) {
	for _, c := range []struct {
		format, lines string
		passes        bool // the usage reads to the end
	}{
		{ClaudeCode, `{"type":"user","message":{"role":"user","content":"hi"}}` + "\n" +
			`{"type":"assistant","timestamp":"2026-02-08T11:00:00Z","message":{"id":"m1","model":"m","content":"a","usage":{"input_tokens":4}}}` + "\n" +
			`{"type":"user","message":{"role":"user","content":"again"}}` + "\n" +
			`{"type":"assistant","message":{"id":"m2","model":"m","content":"b","usage":{"input_tokens":-4}}}`, false},
		{ClaudeCode, `{"type":"user","message":{"role":"user","content":"hi"}}` + "\n" +
			`{"type":"assistant","message":{"id":"m1","model":7,"content":"a","usage":{"input_tokens":4}}}`, false},
		{ClaudeCode, `{"type":"user","message":{"role":"user","content":"hi"}}` + "\n" +
			`{"type":"assistant","message":{"id":"m1","model":"m","content":"a","usage":{"input_tokens":4,"cache_creation":[]}}}`, false},
		{ClaudeCode, `{"type":"user","message":{"role":"user","content":"hi"}}` + "\n" +
			`{"type":"assistant","timestamp":5,"message":{"id":"m1","model":"m","content":"a","usage":{"input_tokens":4}}}`, false},
		// A subagent's response that does not read is passed over.
		{ClaudeCode, `{"type":"progress","data":{"type":"agent_progress","message":{"type":"assistant","message":{"id":"s","model":9,"usage":{"input_tokens":1}}}}}` + "\n" +
			`{"type":"user","message":{"role":"user","content":"hi"}}` + "\n" +
			`{"type":"assistant","message":{"id":"m1","model":"m","content":"a","usage":{"input_tokens":4}}}`, true},
		{Codex, `{"type":"turn_context","payload":{"model":"gpt-5"}}` + "\n" +
			`{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":10,"cached_input_tokens":2}}}}` + "\n" +
			`{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":10,"cached_input_tokens":11}}}}` + "\n" +
			`{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":10,"cached_input_tokens":1}}}}`, false},
		{Codex, `{"type":"turn_context","payload":{"model":["gpt-5"]}}` + "\n" +
			`{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":10}}}}`, false},
		{Codex, `{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":"x","last_token_usage":{"input_tokens":10}}}}`, false},
	} {
		t.Run(c.format, func(t *testing.T) {
			s, err := Read(strings.NewReader(c.lines), c.format)
			require.NoError(t, err, "the usage never stops the session")
			got, gotErr := s.BilledRequests()
			want, wantErr := refBilledRequests(strings.NewReader(c.lines), c.format)
			assert.Equal(t, want, got)
			if c.passes {
				require.NoError(t, wantErr)
				require.NoError(t, gotErr)
				require.Len(t, got, 1)
				return
			}
			require.Error(t, wantErr)
			require.Error(t, gotErr)
			var gotPE, wantPE *ParseError
			require.ErrorAs(t, gotErr, &gotPE)
			require.ErrorAs(t, wantErr, &wantPE)
			assert.Equal(t, wantPE.Line, gotPE.Line)
			assert.Equal(t, want, got)

			viaRead, err := BilledRequests(strings.NewReader(c.lines), c.format)
			assert.Equal(t, gotErr, err)
			assert.Equal(t, got, viaRead)
		})
	}
}

// refBilledRequests is how the usage was read before the readers collected
// it: a second pass over the file with a decoder of its own. It is the
// reference the readers' pass is held to.
func refBilledRequests(r io.Reader, format string) ([]cost.Request, error) {
	br := bufio.NewReader(r)
	switch format {
	case ClaudeCode:
		return refClaudeCodeBilled(br)
	case Codex:
		return refCodexBilled(br)
	}
	return nil, nil
}

type refBilledMessage struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	Usage *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheCreation            *struct {
			Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
			Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
		} `json:"cache_creation"`
	} `json:"usage"`
}

func refClaudeCodeBilled(r *bufio.Reader) ([]cost.Request, error) {
	var out []cost.Request
	at := map[string]int{} // response ID -> index in out
	err := readJSONL(r, ClaudeCode, func(line []byte, n int) error {
		var rec struct {
			Type      string           `json:"type"`
			Timestamp string           `json:"timestamp"`
			Message   json.RawMessage  `json:"message"`
			Data      *json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return err
		}
		var m refBilledMessage
		thread := ""
		switch {
		case rec.Type == "assistant" && len(rec.Message) > 0 && rec.Message[0] == '{':
			if err := json.Unmarshal(rec.Message, &m); err != nil {
				return fmt.Errorf("message: %v", err)
			}
		case rec.Type == "progress" && rec.Data != nil:
			// A subagent's response, billed like the main conversation's.
			var d struct {
				AgentID string `json:"agentId"`
				Message *struct {
					Message *refBilledMessage `json:"message"`
				} `json:"message"`
			}
			if json.Unmarshal(*rec.Data, &d) != nil || d.Message == nil || d.Message.Message == nil {
				return nil
			}
			m, thread = *d.Message.Message, "agent-"+d.AgentID
		default:
			return nil
		}
		u := m.Usage
		if u == nil || m.Model == "<synthetic>" {
			return nil
		}
		write5m, write1h := u.CacheCreationInputTokens, int64(0)
		if c := u.CacheCreation; c != nil && c.Ephemeral5m+c.Ephemeral1h > 0 {
			write5m, write1h = c.Ephemeral5m, c.Ephemeral1h
			if rest := u.CacheCreationInputTokens - write5m - write1h; rest > 0 {
				write5m += rest
			}
		}
		req, err := refBilled(rec.Timestamp, m.Model, u.InputTokens, u.CacheReadInputTokens, write5m, write1h, u.OutputTokens)
		if err != nil {
			return err
		}
		req.Thread = thread
		if i, ok := at[m.ID]; ok && m.ID != "" {
			req.Time = out[i].Time // the response's first line is when it began
			out[i] = req
			return nil
		}
		at[m.ID] = len(out)
		out = append(out, req)
		return nil
	})
	return out, err
}

func refCodexBilled(r *bufio.Reader) ([]cost.Request, error) {
	type tokenUsage struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	}
	var out []cost.Request
	model := ""
	var lastTotal *tokenUsage
	err := readJSONL(r, Codex, func(line []byte, n int) error {
		var l struct {
			Timestamp string `json:"timestamp"`
			Type      string `json:"type"`
			Payload   struct {
				Type  string `json:"type"`
				Model string `json:"model"`
				Info  *struct {
					Total *tokenUsage `json:"total_token_usage"`
					Last  *tokenUsage `json:"last_token_usage"`
				} `json:"info"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			return err
		}
		switch {
		case l.Type == "turn_context" && l.Payload.Model != "":
			model = l.Payload.Model
		case l.Type == "event_msg" && l.Payload.Type == "token_count" && l.Payload.Info != nil && l.Payload.Info.Last != nil:
			// Codex repeats a token_count with the same totals when
			// nothing was called in between.
			if t := l.Payload.Info.Total; t != nil {
				if lastTotal != nil && *t == *lastTotal {
					return nil
				}
				lastTotal = t
			}
			u := l.Payload.Info.Last
			if u.CachedInputTokens > u.InputTokens {
				return fmt.Errorf("token_count: cached_input_tokens %d exceeds input_tokens %d", u.CachedInputTokens, u.InputTokens)
			}
			req, err := refBilled(l.Timestamp, model, u.InputTokens-u.CachedInputTokens, u.CachedInputTokens, 0, 0, u.OutputTokens)
			if err != nil {
				return err
			}
			out = append(out, req)
		}
		return nil
	})
	return out, err
}

func refBilled(timestamp, model string, input, read, write5m, write1h, output int64) (cost.Request, error) {
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
	if t, err := time.Parse(time.RFC3339Nano, timestamp); err == nil {
		req.Time = t
	}
	return req, nil
}
