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
	AgentID          string     `json:"agentId"`
	ParentToolUseID  string     `json:"parentToolUseID"`
	Message          *ccMessage `json:"message"`
	Data             *struct {
		Type    string `json:"type"`
		AgentID string `json:"agentId"`
		Message *struct {
			Type    string     `json:"type"`
			Message *ccMessage `json:"message"`
		} `json:"message"`
	} `json:"data"`
	Appended        *Appended `json:"compact_host_appended"`
	CompactMetadata *struct {
		Trigger   string `json:"trigger"`
		PreTokens int    `json:"preTokens"`
	} `json:"compactMetadata"`

	// Read for the usage only (BilledRequests).
	Timestamp borrowedRaw `json:"timestamp"`
}

type ccMessage struct {
	ID      string          `json:"id"`
	Model   borrowedRaw     `json:"model"` // read for the usage only
	Content json.RawMessage `json:"content"`
	Usage   *struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`

		CacheCreation borrowedRaw `json:"cache_creation"` // read for the usage only
	} `json:"usage"`
}

// readClaudeCode reads a Claude Code session. Claude Code writes each content
// block of one API response as its own assistant line with the same
// message.id, and each tool result as its own user line, interleaved; lines
// of one response are merged back into one message and the results gathered
// after it. Sidechain (subagent) lines are not part of the main conversation
// and are skipped. The compact_boundary record and the isCompactSummary user
// message after it become an AgentCompaction.
//
// A compaction written by AppendCompaction repeats the kept messages after
// its summary, as copies whose uuids derive from the summary's uuid and the
// original's (copyUUID): they are not read into Messages a second time but
// become the compaction's Replacement, as Codex's kept history does.
func readClaudeCode(r *bufio.Reader, s *Session) error {
	return readClaudeCodeTracked(r, s, nil)
}

// ccBuilder gathers the lines of a Claude Code conversation into messages.
type ccBuilder struct {
	msgs          []abi.Message
	lastAPIID     string
	lastAssistant int
}

// add adds one user or assistant line and returns the index of the
// message it went into, and whether it opened that message.
func (b *ccBuilder) add(rec *ccRecord, blocks []abi.Block, n int) (int, bool) {
	var usage *abi.Usage
	if u := rec.Message.Usage; u != nil && rec.Type == "assistant" {
		usage = &abi.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
	}
	if rec.Type == "assistant" && rec.Message.ID != "" && rec.Message.ID == b.lastAPIID {
		m := &b.msgs[b.lastAssistant]
		m.Content = append(m.Content, blocks...)
		if usage != nil {
			m.Usage = usage // every line repeats the usage; the last is the final one
		}
		return b.lastAssistant, false
	}
	id := rec.UUID
	if id == "" {
		id = ClaudeCode + "-" + strconv.Itoa(n)
	}
	b.msgs = append(b.msgs, abi.Message{ID: id, Role: rec.Type, Content: blocks, Usage: usage})
	if rec.Type == "assistant" {
		b.lastAPIID, b.lastAssistant = rec.Message.ID, len(b.msgs)-1
	}
	return len(b.msgs) - 1, true
}

func readClaudeCodeTracked(r *bufio.Reader, s *Session, tr *sourceLines) error {
	main := &ccBuilder{lastAssistant: -1}
	bill := startBilling(s, ClaudeCode)
	pendingSummary := -1         // compaction waiting for its summary message
	lineMsg := map[string]bool{} // uuids of the message lines read
	var copies map[string]bool   // uuids of the copies a compaction kept
	var kept *ccBuilder          // the copies, read as messages
	copiesOf := -1               // the compaction they belong to
	keptOf := map[int][]abi.Message{}
	subagents := map[string]int{}
	flush := func() {
		if kept != nil && len(kept.msgs) > 0 {
			keptOf[copiesOf] = kept.msgs
		}
		copies, kept = nil, nil
	}
	// subagent adds one line of a subagent's conversation.
	subagent := func(id, toolUseID, role string, m *ccMessage) {
		k, ok := subagents[id]
		if !ok {
			k = len(s.Subagents)
			subagents[id] = k
			s.Subagents = append(s.Subagents, Subagent{ID: id})
		}
		sa := &s.Subagents[k]
		if sa.ToolUseID == "" {
			sa.ToolUseID = toolUseID
		}
		msg := abi.Message{Role: role}
		if m != nil {
			msg.ID = m.ID
			msg.Content, _ = apiContent(m.Content, map[string]int{}) // what cannot be read is not counted
		}
		sa.Messages = append(sa.Messages, msg)
	}
	err := readJSONL(r, ClaudeCode, func(line []byte, n int) error {
		var rec ccRecord
		if err := decode(line, &rec); err != nil {
			return err
		}
		bill.claudeCode(&rec, n)
		switch rec.Type {
		case "user", "assistant":
		case "system":
			if rec.Subtype == "compact_boundary" {
				flush()
				c := AgentCompaction{ID: rec.UUID, FirstKept: len(main.msgs), Line: n, Bytes: len(line) + 1,
					Ours: rec.Appended != nil, AppendedTo: rec.Appended}
				if rec.CompactMetadata != nil {
					c.Trigger, c.PreTokens = rec.CompactMetadata.Trigger, rec.CompactMetadata.PreTokens
				}
				s.AgentCompactions = append(s.AgentCompactions, c)
				pendingSummary = len(s.AgentCompactions) - 1
				main.lastAPIID = ""
				return nil
			}
			s.Skipped["system/"+rec.Subtype]++
			return nil
		case "progress":
			if d := rec.Data; d != nil && d.Type == "agent_progress" {
				if d.Message != nil && (d.Message.Type == "user" || d.Message.Type == "assistant") {
					subagent(d.AgentID, rec.ParentToolUseID, d.Message.Type, d.Message.Message)
				}
				return nil
			}
			s.Skipped[rec.Type]++
			return nil
		case "":
			return errors.New(`expected a record with a "type"`)
		default:
			s.Skipped[rec.Type]++
			return nil
		}
		if rec.IsSidechain {
			subagent(rec.AgentID, rec.ParentToolUseID, rec.Type, rec.Message)
			return nil
		}
		if rec.Message == nil {
			return fmt.Errorf("%s record without a message object", rec.Type)
		}
		blocks, err := apiContent(rec.Message.Content, s.Skipped)
		if err != nil {
			return fmt.Errorf("message.content: %s", jsonReason(err))
		}
		if rec.UUID != "" && copies[rec.UUID] {
			// A copy is where the live context comes from: a later
			// compaction may keep it, and copy it again.
			i, opened := kept.add(&rec, blocks, n)
			lineMsg[rec.UUID] = true
			if opened {
				tr.open(kept.msgs[i].ID, n)
			}
			tr.copied(n)
			s.AgentCompactions[copiesOf].Bytes += len(line) + 1
			return nil
		}
		if rec.IsCompactSummary {
			if pendingSummary < 0 {
				flush()
				s.AgentCompactions = append(s.AgentCompactions, AgentCompaction{ID: rec.UUID, FirstKept: len(main.msgs), Line: n})
				pendingSummary = len(s.AgentCompactions) - 1
			}
			s.AgentCompactions[pendingSummary].Bytes += len(line) + 1
			s.AgentCompactions[pendingSummary].Summary = textOf(blocks, abi.BlockText)
			copiesOf, kept = pendingSummary, &ccBuilder{lastAssistant: -1}
			copies = make(map[string]bool, len(lineMsg))
			for u := range lineMsg {
				copies[copyUUID(rec.UUID, u)] = true
			}
			pendingSummary = -1
			return nil
		}
		i, opened := main.add(&rec, blocks, n)
		lineMsg[rec.UUID] = true
		if opened {
			tr.open(main.msgs[i].ID, n)
		}
		tr.item(n)
		return nil
	})
	if err != nil && !errors.Is(err, ErrTornLine) {
		return err
	}
	flush()
	// The copies are normalized the way the originals are, so the kept
	// history reads as the same messages: when the whole file needs
	// repairs, normalize gathers every call's results into one message,
	// and the copies must be gathered too. An empty message (dropped by
	// normalize, refused by Validate) takes them down the same path.
	repair := needsRepair(main.msgs)
	for i, msgs := range keptOf {
		if repair {
			msgs = append(msgs, abi.Message{Role: abi.RoleSystem})
		}
		s.AgentCompactions[i].Replacement, _ = normalize(msgs, nil, s.AgentCompactions[i].ID+"-r", map[string]int{})
	}
	finish(s, main.msgs, ClaudeCode)
	return err
}

// needsRepair reports whether normalize changes msgs beyond their IDs.
func needsRepair(msgs []abi.Message) bool {
	c := append([]abi.Message(nil), msgs...)
	fixIDs(c, "", map[string]int{})
	return Validate(c) != nil
}
