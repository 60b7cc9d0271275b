package formats

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/compact-host/compact-host/host/cost"
)

// maxUsageTokens bounds one recorded token count; no provider reports more.
const maxUsageTokens = 1 << 40

// BilledRequests reads the usage an agent's session file records for the
// model calls it made, in file order. Claude Code records message.usage
// on every line of a response (the last is kept, once per response, its
// cache writes split by TTL from cache_creation) and its subagents' in
// their progress records; Codex records a token_count event after each
// call (last_token_usage, whose input counts the cached part). Other
// formats record no usage: nil, nil.
func BilledRequests(r io.Reader, format string) ([]cost.Request, error) {
	br := bufio.NewReader(r)
	switch format {
	case ClaudeCode:
		return claudeCodeBilled(br)
	case Codex:
		return codexBilled(br)
	}
	return nil, nil
}

type ccBilledMessage struct {
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

func claudeCodeBilled(r *bufio.Reader) ([]cost.Request, error) {
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
		var m ccBilledMessage
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
					Message *ccBilledMessage `json:"message"`
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
		req, err := billed(rec.Timestamp, m.Model, u.InputTokens, u.CacheReadInputTokens, write5m, write1h, u.OutputTokens)
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

func codexBilled(r *bufio.Reader) ([]cost.Request, error) {
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
			req, err := billed(l.Timestamp, model, u.InputTokens-u.CachedInputTokens, u.CachedInputTokens, 0, 0, u.OutputTokens)
			if err != nil {
				return err
			}
			out = append(out, req)
		}
		return nil
	})
	return out, err
}

// billed checks recorded token counts and makes a request of them.
func billed(timestamp, model string, input, read, write5m, write1h, output int64) (cost.Request, error) {
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
