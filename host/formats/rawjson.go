package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// The request writers keep every byte they do not change, so they work on
// byte spans of the document they read rather than on decoded values:
// decoding and re-encoding would reorder keys, drop unknown fields and
// rewrite numbers and escapes.

// span is the byte range [start, end) of a JSON value in a document.
type span struct{ start, end int }

// member is one key and value of a JSON object.
type member struct {
	key      string
	keyStart int // offset of the key's opening quote
	val      span
}

var errNotJSON = errors.New("not a JSON value")

// skipSpace returns the offset of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipValue returns the offset just past the JSON value starting at i. b
// must be valid JSON there (the callers have decoded it already); a cut
// value yields errNotJSON rather than a panic.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errNotJSON
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errNotJSON
	}
	start := i
	for i < len(b) && !bytes.ContainsRune([]byte(" \t\r\n,]}"), rune(b[i])) {
		i++
	}
	if i == start {
		return 0, errNotJSON
	}
	return i, nil
}

func skipString(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errNotJSON
}

// objectMembers lists the members of the object whose value spans v in b,
// in document order.
func objectMembers(b []byte, v span) ([]member, error) {
	i := skipSpace(b, v.start)
	if i >= v.end || b[i] != '{' {
		return nil, errNotJSON
	}
	var out []member
	i = skipSpace(b, i+1)
	if i < v.end && b[i] == '}' {
		return out, nil
	}
	for i < v.end {
		if b[i] != '"' {
			return nil, errNotJSON
		}
		kend, err := skipString(b, i)
		if err != nil {
			return nil, err
		}
		var key string
		if err := json.Unmarshal(b[i:kend], &key); err != nil {
			return nil, err
		}
		j := skipSpace(b, kend)
		if j >= v.end || b[j] != ':' {
			return nil, errNotJSON
		}
		vs := skipSpace(b, j+1)
		ve, err := skipValue(b, vs)
		if err != nil {
			return nil, err
		}
		out = append(out, member{key: key, keyStart: i, val: span{vs, ve}})
		i = skipSpace(b, ve)
		if i < v.end && b[i] == '}' {
			return out, nil
		}
		if i >= v.end || b[i] != ',' {
			return nil, errNotJSON
		}
		i = skipSpace(b, i+1)
	}
	return nil, errNotJSON
}

// arrayElems lists the spans of the elements of the array spanning v in b.
func arrayElems(b []byte, v span) ([]span, error) {
	i := skipSpace(b, v.start)
	if i >= v.end || b[i] != '[' {
		return nil, errNotJSON
	}
	out := []span{}
	i = skipSpace(b, i+1)
	if i < v.end && b[i] == ']' {
		return out, nil
	}
	for i < v.end {
		e, err := skipValue(b, i)
		if err != nil {
			return nil, err
		}
		out = append(out, span{i, e})
		i = skipSpace(b, e)
		if i < v.end && b[i] == ']' {
			return out, nil
		}
		if i >= v.end || b[i] != ',' {
			return nil, errNotJSON
		}
		i = skipSpace(b, i+1)
	}
	return nil, errNotJSON
}

// find returns the member named key, or nil. It picks the member
// encoding/json decodes into a field of that name: the last one whose key
// matches regardless of case.
func find(ms []member, key string) *member {
	for i := len(ms) - 1; i >= 0; i-- {
		if strings.EqualFold(ms[i].key, key) {
			return &ms[i]
		}
	}
	return nil
}

// patch is one replacement of a byte range of a document.
type patch struct {
	span
	with []byte
}

// applyPatches returns b with the patches applied; they must be sorted and
// not overlap.
func applyPatches(b []byte, ps []patch) []byte {
	n := len(b)
	for _, p := range ps {
		n += len(p.with) - (p.end - p.start)
	}
	out := make([]byte, 0, n)
	at := 0
	for _, p := range ps {
		out = append(out, b[at:p.start]...)
		out = append(out, p.with...)
		at = p.end
	}
	return append(out, b[at:]...)
}

// setMembers returns the object spanning v in b with each key of set given
// its new value (nil removes the member), every other byte kept. A key
// names the member find picks for it, so a member the readers found as
// "Messages" is given its new value under the name it was read by, not
// written a second time. Keys not in the object are added at its end, in
// the order of keys.
func setMembers(b []byte, v span, keys []string, set map[string][]byte) ([]byte, error) {
	ms, err := objectMembers(b, v)
	if err != nil {
		return nil, err
	}
	named := make(map[int]string, len(set)) // member index -> key of set
	for key := range set {
		for i := len(ms) - 1; i >= 0; i-- {
			if strings.EqualFold(ms[i].key, key) {
				named[i] = key
				break
			}
		}
	}
	obj := b[v.start:v.end]
	var ps []patch
	done := map[string]bool{}
	for k, m := range ms {
		key, ok := named[k]
		if !ok {
			continue
		}
		val := set[key]
		done[key] = true
		if val != nil {
			ps = append(ps, patch{span{m.val.start - v.start, m.val.end - v.start}, val})
			continue
		}
		// Remove the member with the comma that joins it to a neighbour.
		switch {
		case k+1 < len(ms):
			ps = append(ps, patch{span{m.keyStart - v.start, ms[k+1].keyStart - v.start}, nil})
		case k > 0:
			ps = append(ps, patch{span{ms[k-1].val.end - v.start, m.val.end - v.start}, nil})
		default:
			ps = append(ps, patch{span{m.keyStart - v.start, m.val.end - v.start}, nil})
		}
	}
	var add []byte
	for _, k := range keys {
		val := set[k]
		if done[k] || val == nil {
			continue
		}
		if len(ms) > 0 || len(add) > 0 {
			add = append(add, ',')
		}
		kb, _ := json.Marshal(k)
		add = append(append(append(add, kb...), ':'), val...)
	}
	if len(add) > 0 {
		end := len(obj) - 1 // the closing brace
		if len(ms) > 0 {
			end = ms[len(ms)-1].val.end - v.start
		}
		ps = append(ps, patch{span{end, end}, add})
	}
	sortPatches(ps)
	return applyPatches(obj, ps), nil
}

func sortPatches(ps []patch) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].start < ps[j-1].start; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// marshal encodes v as compact JSON without HTML escaping, as the request
// writers write new values.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
