package formats

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/compact-host/compact-host/abi"
)

type ccRecord struct {
	Type             string     `json:"type"`
	Subtype          string     `json:"subtype"`
	UUID             string     `json:"uuid"`
	IsSidechain      bool       `json:"isSidechain"`
	IsCompactSummary bool       `json:"isCompactSummary"`
	Message          *ccMessage `json:"message"`
	CompactMetadata  *struct {
		Trigger   string `json:"trigger"`
		PreTokens int    `json:"preTokens"`
	} `json:"compactMetadata"`
}

type ccMessage struct {
	ID      string          `json:"id"`
	Content json.RawMessage `json:"content"`
	Usage   *struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

// readClaudeCode reads a Claude Code session. Claude Code writes each content
// block of one API response as its own assistant line with the same
// message.id, and each tool result as its own user line, interleaved; lines
// of one response are merged back into one message and the results gathered
// after it. Sidechain (subagent) lines are not part of the main conversation
// and are skipped. The compact_boundary record and the isCompactSummary user
// message after it become an AgentCompaction.
func readClaudeCode(r *bufio.Reader, s *Session) error {
	var msgs []abi.Message
	lastAPIID, lastAssistant := "", -1
	pendingSummary := -1 // compaction waiting for its summary message
	err := readJSONL(r, ClaudeCode, func(line []byte, n int) error {
		var rec ccRecord
		if err := decode(line, &rec); err != nil {
			return err
		}
		switch rec.Type {
		case "user", "assistant":
		case "system":
			if rec.Subtype == "compact_boundary" {
				c := AgentCompaction{ID: rec.UUID, FirstKept: len(msgs)}
				if rec.CompactMetadata != nil {
					c.Trigger, c.PreTokens = rec.CompactMetadata.Trigger, rec.CompactMetadata.PreTokens
				}
				s.AgentCompactions = append(s.AgentCompactions, c)
				pendingSummary = len(s.AgentCompactions) - 1
				lastAPIID = ""
				return nil
			}
			s.Skipped["system/"+rec.Subtype]++
			return nil
		case "":
			return errors.New(`expected a record with a "type"`)
		default:
			s.Skipped[rec.Type]++
			return nil
		}
		if rec.IsSidechain {
			s.Skipped["sidechain"]++
			return nil
		}
		if rec.Message == nil {
			return fmt.Errorf("%s record without a message object", rec.Type)
		}
		blocks, err := apiContent(rec.Message.Content, s.Skipped)
		if err != nil {
			return fmt.Errorf("message.content: %s", jsonReason(err))
		}
		if rec.IsCompactSummary {
			if pendingSummary < 0 {
				s.AgentCompactions = append(s.AgentCompactions, AgentCompaction{ID: rec.UUID, FirstKept: len(msgs)})
				pendingSummary = len(s.AgentCompactions) - 1
			}
			s.AgentCompactions[pendingSummary].Summary = textOf(blocks, abi.BlockText)
			pendingSummary = -1
			return nil
		}
		var usage *abi.Usage
		if u := rec.Message.Usage; u != nil && rec.Type == "assistant" {
			usage = &abi.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
				CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
		}
		if rec.Type == "assistant" && rec.Message.ID != "" && rec.Message.ID == lastAPIID {
			m := &msgs[lastAssistant]
			m.Content = append(m.Content, blocks...)
			if usage != nil {
				m.Usage = usage // every line repeats the usage; the last is the final one
			}
			return nil
		}
		id := rec.UUID
		if id == "" {
			id = ClaudeCode + "-" + strconv.Itoa(n)
		}
		msgs = append(msgs, abi.Message{ID: id, Role: rec.Type, Content: blocks, Usage: usage})
		if rec.Type == "assistant" {
			lastAPIID, lastAssistant = rec.Message.ID, len(msgs)-1
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrTornLine) {
		return err
	}
	finish(s, msgs, ClaudeCode)
	return err
}
