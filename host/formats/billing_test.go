package formats

import (
	"bufio"
	"encoding/json"
	"os"
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

	_, err = BilledRequests(strings.NewReader(`{"type":"user"}`+"\n"+`{"type":"assistant","message":{"id":"m","model":"m","usage":{"input_tokens":-4}}}`), ClaudeCode)
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
