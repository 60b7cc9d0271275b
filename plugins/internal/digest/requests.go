package digest

import "github.com/compact-host/compact-host/abi"

// isObservation reports whether msgs[i] is command output or a format
// reminder sent back as user text after an assistant message
// (abi.IsObservation). The first message is judged by its text alone: a
// span to fold may start right after an action whose output it opens with.
func isObservation(msgs []abi.Message, i int) bool {
	if i < 0 || i >= len(msgs) {
		return false
	}
	var prev *abi.Message
	if i > 0 {
		prev = &msgs[i-1]
	}
	return abi.IsObservation(prev, &msgs[i])
}

// Request is one user request of a conversation.
type Request struct {
	// Index is the position of the message in the folded messages.
	Index int
	Text  string
}

// Requests lists the user requests of msgs in order: what abi.RequestText
// reads as a request, leaving out command output sent as user text.
func Requests(msgs []abi.Message) []Request {
	var out []Request
	for i, m := range msgs {
		if t, ok := abi.RequestText(m); ok && !isObservation(msgs, i) {
			out = append(out, Request{Index: i, Text: t})
		}
	}
	return out
}

// LatestRequest returns the last user request of msgs.
func LatestRequest(msgs []abi.Message) (Request, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if t, ok := abi.RequestText(msgs[i]); ok && !isObservation(msgs, i) {
			return Request{Index: i, Text: t}, true
		}
	}
	return Request{}, false
}
