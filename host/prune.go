package host

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
)

// prune shortens old tool results over PruneMinTokens, outside the newest
// protect tokens, in place (head and tail with a notice). The originals
// stay in the log. It returns how many results it shortened.
func (e *Engine) prune(s *Session, protect int) int {
	if e.cfg.DisablePrune {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.contextTokens()
	limit := s.protectFrom(protect)
	// The latest request is never touched, nor anything after it when
	// protection is on.
	pruned := 0
	for i := s.viewStart; i < limit && i < len(s.msgs); i++ {
		st := &s.msgs[i]
		if st.msg.Pinned {
			continue
		}
		for bi := range st.msg.Content {
			b := &st.msg.Content[bi]
			if b.Type != abi.BlockToolResult {
				continue
			}
			if _, done := st.pruned[bi]; done {
				continue
			}
			// Cheap filter before counting: a token is at least one byte.
			if len(b.Text) <= e.cfg.PruneMinTokens || s.counter.Count(b.Text) <= e.cfg.PruneMinTokens {
				continue
			}
			text := headTail(b.Text, e.cfg.PruneKeepTokens*4)
			if s.log != nil {
				if err := s.writeEntry(Entry{Type: EntryPrune, Prune: &Prune{MessageID: st.msg.ID, Block: bi, Text: text}}); err != nil {
					e.log.Warn("prune not logged; result left as is", "session", s.id, "err", err)
					continue
				}
			}
			s.applyPrune(i, bi, text)
			pruned++
		}
	}
	if pruned > 0 {
		after := s.contextTokens()
		s.mu.Unlock()
		e.events.emit(&PruneEvent{Session: s.id, Results: pruned, TokensBefore: e.calibrated(before), TokensAfter: e.calibrated(after)})
		s.mu.Lock()
	}
	return pruned
}

// headTail keeps about keepBytes of text: three fifths from the head and
// two fifths from the tail, cut at line boundaries where one is near and
// never inside a UTF-8 sequence, with a notice of what was omitted.
func headTail(text string, keepBytes int) string {
	if len(text) <= keepBytes {
		return text
	}
	headN := keepBytes * 3 / 5
	tailN := keepBytes - headN
	head := text[:utf8Floor(text, headN)]
	if nl := strings.LastIndexByte(head, '\n'); nl > len(head)/2 {
		head = head[:nl+1]
	}
	tailStart := utf8Ceil(text, len(text)-tailN)
	tail := text[tailStart:]
	if nl := strings.IndexByte(tail, '\n'); nl >= 0 && nl < len(tail)/2 {
		tail = tail[nl+1:]
	}
	omitted := text[len(head) : len(text)-len(tail)]
	notice := fmt.Sprintf("\n[... %d lines (%d bytes) of this tool output were omitted to save context; the full output is kept in the session log ...]\n",
		strings.Count(omitted, "\n"), len(omitted))
	return head + notice + tail
}

// utf8Floor is the largest index <= i that starts a rune.
func utf8Floor(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// utf8Ceil is the smallest index >= i that starts a rune.
func utf8Ceil(s string, i int) int {
	if i <= 0 {
		return 0
	}
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}
