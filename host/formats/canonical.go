package formats

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/compact-host/compact-host/abi"
)

// canonicalLine is either a plain abi.Message (it has a role) or a session
// log entry (it has a type).
type canonicalLine struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Message json.RawMessage `json:"message"`
}

func readCanonical(r *bufio.Reader, s *Session) error {
	var msgs []abi.Message
	err := readJSONL(r, Canonical, func(line []byte, n int) error {
		var l canonicalLine
		if err := decode(line, &l); err != nil {
			return err
		}
		var m abi.Message
		switch {
		case l.Role != "":
			if err := decode(line, &m); err != nil {
				return err
			}
		case l.Type == "message":
			if len(l.Message) == 0 || l.Message[0] != '{' {
				return errors.New(`entry of type "message": expected a JSON object in "message"`)
			}
			if err := decode(l.Message, &m); err != nil {
				return fmt.Errorf("message: %s", jsonReason(err))
			}
		case l.Type == "compaction":
			s.LogCompactions = append(s.LogCompactions, LogCompaction{At: len(msgs), Entry: append(json.RawMessage(nil), line...)})
			return nil
		case l.Type != "":
			s.Skipped[l.Type]++
			return nil
		default:
			return errors.New(`expected a message (with "role") or a log entry (with "type")`)
		}
		switch m.Role {
		case abi.RoleSystem, abi.RoleUser, abi.RoleAssistant:
		default:
			return fmt.Errorf("unknown role %q", m.Role)
		}
		for k, b := range m.Content {
			switch b.Type {
			case abi.BlockText, abi.BlockThinking, abi.BlockToolUse, abi.BlockToolResult, abi.BlockImage:
			default:
				return fmt.Errorf("content[%d]: unknown block type %q", k, b.Type)
			}
		}
		if m.ID == "" {
			m.ID = Canonical + "-" + strconv.Itoa(n)
		}
		msgs = append(msgs, m)
		return nil
	})
	if err != nil && !errors.Is(err, ErrTornLine) {
		return err
	}
	finish(s, msgs, Canonical)
	return err
}

// writeCanonical writes one abi.Message per line. Everything in the message
// is kept.
func writeCanonical(w io.Writer, msgs []abi.Message) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i := range msgs {
		if err := enc.Encode(&msgs[i]); err != nil {
			return fmt.Errorf("formats: canonical: message %d: %w", i, err)
		}
	}
	return bw.Flush()
}
