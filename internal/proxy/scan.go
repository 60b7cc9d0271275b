package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// span is a value's bytes in a body: body[start:end].
type span struct{ start, end int }

func (s span) of(b []byte) []byte { return b[s.start:s.end] }

// rawRequest is a messages request kept as the bytes it arrived in. Only
// the top level is scanned, and the messages array split into its
// elements; nothing is decoded until the gate needs it.
type rawRequest struct {
	body []byte
	// fields maps each top-level key to its value.
	fields map[string]span
	// array is the messages array, brackets included; msgs its elements.
	array span
	msgs  []span
}

var errNotObject = errors.New("the body is not a JSON object")

// scanRequest splits a request whose conversation is "messages".
func scanRequest(body []byte) (*rawRequest, error) { return scanConversation(body, "messages") }

// scanConversation splits body, whose conversation is the array under
// key ("messages", or a Responses request's "input"). It checks
// structure (brackets, strings), not every literal: a body the upstream
// will refuse is forwarded as it is.
func scanConversation(body []byte, key string) (*rawRequest, error) {
	r := &rawRequest{body: body, fields: make(map[string]span, 16)}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, errNotObject
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return nil, errors.New("the body is an empty object")
	}
	for {
		if i >= len(body) || body[i] != '"' {
			return nil, fmt.Errorf("offset %d: expected a key", i)
		}
		kEnd, err := scanString(body, i)
		if err != nil {
			return nil, err
		}
		key := string(body[i+1 : kEnd-1])
		if bytes.IndexByte(body[i:kEnd], '\\') >= 0 {
			if err := json.Unmarshal(body[i:kEnd], &key); err != nil {
				return nil, fmt.Errorf("offset %d: key: %w", i, err)
			}
		}
		i = skipSpace(body, kEnd)
		if i >= len(body) || body[i] != ':' {
			return nil, fmt.Errorf("offset %d: expected ':' after key %q", i, key)
		}
		i = skipSpace(body, i+1)
		vEnd, err := scanValue(body, i)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		if _, dup := r.fields[key]; dup {
			// Which of two values a provider honours is its business;
			// a rewrite would have to guess.
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		r.fields[key] = span{i, vEnd}
		i = skipSpace(body, vEnd)
		if i >= len(body) {
			return nil, errors.New("unexpected end of the body")
		}
		if body[i] == '}' {
			if skipSpace(body, i+1) != len(body) {
				return nil, fmt.Errorf("offset %d: data after the object", i+1)
			}
			break
		}
		if body[i] != ',' {
			return nil, fmt.Errorf("offset %d: expected ',' or '}'", i)
		}
		i = skipSpace(body, i+1)
	}
	arr, ok := r.fields[key]
	if !ok {
		return nil, fmt.Errorf("no %q", key)
	}
	if body[arr.start] != '[' {
		return nil, fmt.Errorf("%q is not an array", key)
	}
	r.array = arr
	i = skipSpace(body, arr.start+1)
	if body[i] == ']' {
		return r, nil
	}
	for {
		end, err := scanValue(body, i)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, len(r.msgs), err)
		}
		if body[i] != '{' {
			return nil, fmt.Errorf("%s[%d] is not an object", key, len(r.msgs))
		}
		r.msgs = append(r.msgs, span{i, end})
		i = skipSpace(body, end)
		if body[i] == ']' {
			return r, nil
		}
		if body[i] != ',' {
			return nil, fmt.Errorf("offset %d: expected ',' or ']' in %s", i, key)
		}
		i = skipSpace(body, i+1)
	}
}

// field returns a top-level value, or nil.
func (r *rawRequest) field(key string) []byte {
	s, ok := r.fields[key]
	if !ok {
		return nil
	}
	return s.of(r.body)
}

// msg returns the raw bytes of messages[i].
func (r *rawRequest) msg(i int) []byte { return r.msgs[i].of(r.body) }

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// scanString returns the end of the string starting at b[i] == '"'.
func scanString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, fmt.Errorf("offset %d: unterminated string", i)
		}
		j += k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

// maxDepth bounds nesting, so a hostile body cannot make the scan deep.
const maxDepth = 512

// scanValue returns the end of the JSON value starting at b[i].
func scanValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("unexpected end of the body")
	}
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := scanString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
				if depth > maxDepth {
					return 0, fmt.Errorf("offset %d: nested deeper than %d", j, maxDepth)
				}
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("offset %d: unterminated %c", i, b[i])
	default:
		j := i
	literal:
		for ; j < len(b); j++ {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				break literal
			}
		}
		if j == i {
			return 0, fmt.Errorf("offset %d: expected a value", i)
		}
		return j, nil
	}
}
