package formats

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/compact-host/compact-host/abi"
)

// Live returns the live context: the conversation as the agent sends it
// when it resumes, after its latest compaction
// (its own or one AppendCompaction wrote): the
// instructions it sends itself, the system messages of the kept history,
// the summary as a user message with Summary set, the rest of the kept
// history (Codex's replacement history, or the copies of the kept lines
// AppendCompaction chains after a Claude Code summary), and the messages
// written since. A session the agent never compacted is returned as
// Messages.
//
// A Codex replacement history is the whole history Codex goes on with:
// of what came before it, only the base instructions are sent, never the
// developer messages the rollout opened with. The developer messages the
// replacement keeps (Codex puts its permissions there, after the user's
// messages) are pinned, so that no later compaction folds them away.
func (s *Session) Live() []abi.Message {
	if len(s.AgentCompactions) == 0 {
		return s.Messages
	}
	c := s.AgentCompactions[len(s.AgentCompactions)-1]
	var out []abi.Message
	if c.whole {
		out = append(out, s.Messages[:min(s.ownInstructions, c.FirstKept)]...)
	} else {
		// The agent sends its leading instructions again, unless the kept
		// history carries them.
		inRepl := map[string]bool{}
		for _, m := range c.Replacement {
			if m.Role == abi.RoleSystem {
				inRepl[textOf(m.Content, abi.BlockText)] = true
			}
		}
		for _, m := range s.Messages[:c.FirstKept] {
			if m.Role != abi.RoleSystem || !m.Pinned {
				break
			}
			if !inRepl[textOf(m.Content, abi.BlockText)] {
				out = append(out, m)
			}
		}
	}
	// The summary goes where the replacement history has it (Codex keeps
	// it there), else after the replacement's instructions.
	i := 0
	for i < len(c.Replacement) && c.Replacement[i].Role == abi.RoleSystem {
		i++
	}
	from := len(out)
	out = append(out, c.Replacement[:i]...)
	if c.Summary != "" && !slices.ContainsFunc(c.Replacement, func(m abi.Message) bool { return m.Summary }) {
		id := "summary"
		if c.ID != "" {
			id += "-" + c.ID
		}
		out = append(out, abi.Message{ID: id, Role: abi.RoleUser, Summary: true, Content: []abi.Block{{Type: abi.BlockText, Text: c.Summary}}})
	}
	out = append(out, c.Replacement[i:]...)
	// The instructions the replacement keeps stay through the next
	// compaction, wherever they stand, as the session's own leading
	// instructions do.
	for k := from; k < len(out); k++ {
		if out[k].Role == abi.RoleSystem {
			out[k].Pinned = true
		}
	}
	return append(out, s.Messages[c.FirstKept:]...)
}

// appendedKey names the member of the first record of a block
// AppendCompaction writes (Claude Code's compact_boundary line, the
// payload of Codex's compacted record) that says what the block was
// appended to. Neither agent reads members it does not know.
const appendedKey = "compact_host_appended"

// Appended is what a block AppendCompaction wrote was appended to, and
// what follows the record that names it: with it, the block can be taken
// away from a copy of the file, or after a move, with no other record.
type Appended struct {
	// PrefixLength and PrefixSHA256 are the length and SHA-256 (hex) of
	// the file's bytes before the block.
	PrefixLength int64  `json:"prefix_length"`
	PrefixSHA256 string `json:"prefix_sha256"`
	// RestLength and RestSHA256 are those of the block's lines after the
	// record that carries these fields.
	RestLength int64  `json:"rest_length"`
	RestSHA256 string `json:"rest_sha256"`
}

// markBlock sets the Appended member on the first record of block, which
// is to be appended to prefix.
func markBlock(format string, prefix, block []byte) ([]byte, error) {
	nl := bytes.IndexByte(block, '\n')
	if nl < 0 {
		return nil, errors.New("formats: a compaction block without a complete record")
	}
	first, rest := block[:nl], block[nl+1:]
	p, r := sha256.Sum256(prefix), sha256.Sum256(rest)
	mark, err := marshal(Appended{PrefixLength: int64(len(prefix)), PrefixSHA256: hex.EncodeToString(p[:]),
		RestLength: int64(len(rest)), RestSHA256: hex.EncodeToString(r[:])})
	if err != nil {
		return nil, err
	}
	set := map[string][]byte{appendedKey: mark}
	var marked []byte
	switch format {
	case ClaudeCode:
		marked, err = setMembers(first, span{0, len(first)}, []string{appendedKey}, set)
	case Codex:
		ms, merr := objectMembers(first, span{0, len(first)})
		if merr != nil {
			return nil, merr
		}
		m := find(ms, "payload")
		if m == nil {
			return nil, errors.New("formats: a compacted record without a payload")
		}
		payload, perr := setMembers(first, m.val, []string{appendedKey}, set)
		if perr != nil {
			return nil, perr
		}
		marked = applyPatches(first, []patch{{m.val, payload}})
	default:
		return nil, fmt.Errorf("%w: it is %s", ErrNotWritable, describeFormat(format))
	}
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(marked)+1+len(rest))
	return append(append(append(out, marked...), '\n'), rest...), nil
}

// OurBlock is the latest compaction block AppendCompaction wrote into a
// file, found by FindAppended from the file alone.
type OurBlock struct {
	// Offset is where the block starts: the length of the bytes it was
	// appended to. End is where it ends.
	Offset, End int64
	// Line is the 1-based line of its first record.
	Line int
}

// Errors of FindAppended.
var (
	// ErrNoBlock: the file holds no block AppendCompaction wrote.
	ErrNoBlock = errors.New("formats: no compaction written by compact-host in this file")
	// ErrBlockChanged: the latest block, or the bytes it was appended
	// to, are no longer what they were when it was written.
	ErrBlockChanged = errors.New("formats: the file changed since the compaction was written into it")
)

// FindAppended finds the latest block AppendCompaction wrote into data by
// the Appended member of its first record, and checks that the bytes
// before it and the block itself are still what it names. The block
// need not end the file: a caller that takes it away must refuse when
// End is short of len(data) (the agent wrote after it).
func FindAppended(data []byte) (OurBlock, error) {
	needle := []byte(`"` + appendedKey + `":`)
	for end := len(data); ; {
		at := bytes.LastIndex(data[:end], needle)
		if at < 0 {
			return OurBlock{}, ErrNoBlock
		}
		end = at
		start := bytes.LastIndexByte(data[:at], '\n') + 1
		stop := len(data)
		if nl := bytes.IndexByte(data[at:], '\n'); nl >= 0 {
			stop = at + nl
		}
		a, ok := appendedOf(data[start:stop])
		if !ok {
			continue // the name inside some text, not our member
		}
		b := OurBlock{Offset: a.PrefixLength, End: int64(stop) + 1 + a.RestLength, Line: bytes.Count(data[:start], []byte("\n")) + 1}
		if gap := int64(start) - a.PrefixLength; gap < 0 || gap > 1 || (gap == 1 && data[start-1] != '\n') ||
			b.End > int64(len(data)) || !sumIs(data[:a.PrefixLength], a.PrefixSHA256) || !sumIs(data[stop+1:b.End], a.RestSHA256) {
			return b, fmt.Errorf("%w: the compaction at line %d was written after %d bytes that are no longer the same, or it was edited", ErrBlockChanged, b.Line, a.PrefixLength)
		}
		return b, nil
	}
}

// appendedOf is the Appended member of a record of ours: on the record
// itself (Claude Code) or on its payload (Codex).
func appendedOf(line []byte) (Appended, bool) {
	var rec struct {
		Mark    *Appended `json:"compact_host_appended"`
		Payload struct {
			Mark *Appended `json:"compact_host_appended"`
		} `json:"payload"`
	}
	if json.Unmarshal(line, &rec) != nil {
		return Appended{}, false
	}
	if rec.Mark == nil {
		rec.Mark = rec.Payload.Mark
	}
	if rec.Mark == nil || rec.Mark.PrefixLength < 0 || rec.Mark.RestLength < 0 {
		return Appended{}, false
	}
	return *rec.Mark, true
}

func sumIs(b []byte, want string) bool {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) == want
}
