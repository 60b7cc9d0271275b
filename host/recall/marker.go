// Package recall makes compaction lossless for the model: a summary carries
// markers, "[recall:s-…]" for the span it folds and "[recall:t-…]" for the
// large tool outputs in it, and an Index over the conversation's originals
// turns a marker back into the original text (Recall) or finds where a
// phrase was said (Search).
//
// A marker is an HMAC of message or tool-call IDs keyed by the
// conversation's first message: the same conversation always gets the same
// markers, and a marker means nothing in any other conversation, which
// cannot derive its key. The package depends on abi and the standard
// library only, so the engine computes markers without linking a reader.
package recall

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
)

// Marker sizes and bounds.
const (
	// MinToolOutputBytes is the size from which a tool output in a folded
	// span gets a marker of its own.
	MinToolOutputBytes = 1024
	// MinSpanBytes is the size of folded text from which a span gets a
	// marker: a shorter one costs about as much to name as to restate.
	MinSpanBytes = 1024
	// MaxToolMarkers bounds the tool-output markers of one compaction:
	// the largest outputs get them.
	MaxToolMarkers = 12
	// halfHex is the hex length of each half of a span reference: 40
	// bits, so that two IDs of a conversation collide with odds of about
	// n²/2⁴¹ (under 10⁻⁴ at 10,000 messages).
	halfHex = 10
	// toolHex is the hex length of a tool-output reference (64 bits).
	toolHex = 16
)

// Key is the secret of one conversation's markers.
type Key [sha256.Size]byte

// KeyFor is the key of the conversation msgs opens: a hash of its first
// message that is not a system message (instructions are the same for
// every conversation of an agent). ok is false when msgs has none.
func KeyFor(msgs []abi.Message) (k Key, ok bool) {
	for i := range msgs {
		if msgs[i].Role != abi.RoleSystem {
			return keyOf(&msgs[i]), true
		}
	}
	return Key{}, false
}

// keyOf hashes what a message says, not its ID: a reader that numbers
// messages itself, or shows a summary under an ID of its own, still
// derives the same key.
func keyOf(m *abi.Message) Key {
	h := sha256.New()
	h.Write([]byte("compact-host recall key\x00" + m.Role + "\x00"))
	for _, b := range m.Content {
		h.Write([]byte(b.Type + "\x00" + b.Text + "\x00" + b.ID + "\x00" + b.ToolUseID + "\x00"))
		h.Write(b.Input)
		h.Write([]byte{0})
	}
	var k Key
	h.Sum(k[:0])
	return k
}

func (k Key) mac(kind, id string, n int) string {
	h := hmac.New(sha256.New, k[:])
	h.Write([]byte(kind + "\x00" + id))
	return hex.EncodeToString(h.Sum(nil))[:n]
}

// ToolRef is the reference of the output of tool call callID.
func (k Key) ToolRef(callID string) string { return "t-" + k.mac("t", callID, toolHex) }

// SpanRef is the reference of the messages from firstID through lastID.
// One message is the span from its ID to its ID.
func (k Key) SpanRef(firstID, lastID string) string {
	return "s-" + k.mac("s", firstID, halfHex) + k.mac("s", lastID, halfHex)
}

// Markers are the markers of a compaction that folds msgs: one for the
// span (of MinSpanBytes or more), then one for each tool output of MinToolOutputBytes or more, the
// MaxToolMarkers largest, in the order they were produced. A span whose
// first or last message has no ID gets no span marker.
func (k Key) Markers(msgs []abi.Message) []abi.Marker {
	if len(msgs) == 0 {
		return nil
	}
	var out []abi.Marker
	first, last := msgs[0].ID, msgs[len(msgs)-1].ID
	if first != "" && last != "" {
		size := 0
		for i := range msgs {
			for _, b := range msgs[i].Content {
				size += len(b.Text) + len(b.Input)
			}
		}
		if size >= MinSpanBytes {
			out = append(out, abi.Marker{Ref: k.SpanRef(first, last), Kind: abi.MarkerSpan, Bytes: size})
		}
	}
	names := map[string]string{}
	type output struct {
		id   string
		size int
		seq  int
	}
	var outs []output
	for i := range msgs {
		for _, b := range msgs[i].Content {
			switch {
			case b.Type == abi.BlockToolUse:
				names[b.ID] = b.Name
			case b.Type == abi.BlockToolResult && b.ToolUseID != "" && len(b.Text) >= MinToolOutputBytes:
				outs = append(outs, output{b.ToolUseID, len(b.Text), len(outs)})
			}
		}
	}
	if len(outs) > MaxToolMarkers {
		// Keep the largest, then put them back in order.
		slices.SortFunc(outs, func(a, b output) int { return cmp.Or(b.size-a.size, a.seq-b.seq) })
		outs = outs[:MaxToolMarkers]
		slices.SortFunc(outs, func(a, b output) int { return a.seq - b.seq })
	}
	for _, o := range outs {
		out = append(out, abi.Marker{Ref: k.ToolRef(o.id), Kind: abi.MarkerToolOutput, ToolName: names[o.id], Bytes: o.size})
	}
	return out
}

// Carried are the markers of an earlier summary, as abi.Markers, so that
// merging it into a new one keeps them: a strategy that rewrites the
// earlier summary may drop them, and the host adds them back.
func Carried(previous string) []abi.Marker {
	var out []abi.Marker
	for _, ref := range abi.MarkersIn(previous) {
		kind := abi.MarkerSpan
		if strings.HasPrefix(ref, "t-") {
			kind = abi.MarkerToolOutput
		}
		out = append(out, abi.Marker{Ref: ref, Kind: kind})
	}
	return out
}

// clip cuts s to at most n bytes at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Hint is the line a summary carries when the agent has the recall tools
// (compact-host mcp): it tells the model that the markers can be
// expanded, and how. It is added only when the agent has the tools, so
// that no request names a tool the agent lacks.
const Hint = "The [recall:…] markers in this summary can be expanded: call the recall tool with the part inside the brackets to read the original messages or tool output, or the search tool to find anything said earlier in this conversation."

// WithHint returns summary ending with Hint, once.
func WithHint(summary string) string {
	if strings.Contains(summary, Hint) {
		return summary
	}
	return strings.TrimRight(summary, "\n") + "\n\n" + Hint
}
