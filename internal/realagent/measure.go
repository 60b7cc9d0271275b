package realagent

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/internal/sessionio"
)

// Sent is the size of one model call an agent sent, counted as `compact-host
// inspect` counts a session.
type Sent struct {
	// Messages is how many canonical messages the call's conversation
	// holds.
	Messages int
	// Conversation is the tokens of the conversation without its system
	// part: Anthropic "messages"; the Responses "input" items that are not
	// developer or system messages.
	Conversation int
	// System is the tokens of the system prompt: Anthropic "system"; the
	// Responses "instructions" and developer or system messages.
	System int
	// Tools is the tokens of the tool schemas, counted over their JSON.
	Tools int
	// Opaque counts the items whose content no one but the provider can
	// read (encrypted reasoning, an encrypted compaction summary); they
	// cost tokens that are not counted here.
	Opaque int
}

// Total is every token counted of the call.
func (s Sent) Total() int { return s.Conversation + s.System + s.Tools }

// CountSent counts a recorded model call of agent with e's tokenizer: the
// conversation and the system prompt through the same readers and engine
// as a session file, the tool schemas over their JSON text.
func CountSent(e *host.Engine, agent Agent, body []byte) (Sent, error) {
	var top struct {
		Tools        json.RawMessage `json:"tools"`
		Instructions string          `json:"instructions"`
		Input        json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return Sent{}, fmt.Errorf("realagent: the recorded request is not a JSON object: %w", err)
	}
	var data []byte
	format := formats.Anthropic
	if agent == Codex {
		// The Responses input items are the items a Codex rollout records,
		// so the rollout reader counts them as it counts a file.
		var err error
		if data, err = responsesAsRollout(top.Instructions, top.Input); err != nil {
			return Sent{}, err
		}
		format = formats.Codex
	} else {
		data = body
	}
	in, err := sessionio.Read(e, "the recorded request", data, format)
	if err != nil {
		return Sent{}, fmt.Errorf("realagent: reading the recorded request: %w", err)
	}
	b := e.Inspect(in.Session, 0)
	s := Sent{Messages: b.Messages, System: b.ByRole.System, Conversation: b.Tokens - b.ByRole.System}
	if len(top.Tools) > 0 && string(top.Tools) != "null" {
		s.Tools = e.CountTokens(string(top.Tools))
	}
	for k, n := range in.Skipped {
		switch k {
		case "reasoning (encrypted)", "compaction (encrypted)":
			s.Opaque += n
		}
	}
	return s, nil
}

// responsesAsRollout writes a Responses request's instructions and input
// as the lines of a Codex rollout.
func responsesAsRollout(instructions string, input json.RawMessage) ([]byte, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(input, &items); err != nil {
		return nil, fmt.Errorf("realagent: the recorded request's \"input\" is not an array of items: %w", err)
	}
	var buf bytes.Buffer
	line := func(typ string, payload any) {
		b, _ := json.Marshal(map[string]any{"type": typ, "payload": payload})
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if instructions != "" {
		line("session_meta", map[string]any{"instructions": instructions})
	}
	for _, it := range items {
		line("response_item", it)
	}
	return buf.Bytes(), nil
}

// InspectEngine is an engine configured as `compact-host inspect` is with
// no flags and no config file: the budget of its default model and that
// model's tokenizer.
func InspectEngine() (*host.Engine, error) {
	return host.New(host.Config{Model: "claude-sonnet-4-5"})
}
