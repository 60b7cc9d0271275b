// Package jsondecode decodes JSON into Go values as encoding/json does,
// reading objects member by member with jsonscan and setting struct fields
// itself: session records are mostly long strings in records of which the
// reader keeps a few members.
package jsondecode

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/compact-host/compact-host/host/internal/jsonscan"
)

// Session files are mostly long strings (tool outputs, file contents) in
// records of which the readers keep a few members. encoding/json checks
// every byte with a state machine before it decodes, skips unknown members
// with the same machine, and copies json.RawMessage members that the
// readers then decode again. Decode reads the same records with
// jsonscan, eight string bytes at a time, and hands encoding/json only
// what it does not handle itself; the result, errors included, is what
// json.Unmarshal gives (any doubt sends the whole value to json.Unmarshal).
//
// The text is checked as it is decoded, in one pass: each string a field
// keeps is checked by jsonscan.String and decoded with what String found
// in it, and each value no field keeps is checked by jsonscan's scanner. A
// first pass checking the whole value would read every string twice more
// (once to check it, once to find its end again). A value that turns out
// not to be JSON half-way has set some fields already: Decode zeroes the
// value and leaves it to json.Unmarshal, as for any other doubt.

// errUndecided sends a value to json.Unmarshal.
var errUndecided = errors.New("jsondecode: undecided")

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	borrowedRawType = reflect.TypeFor[BorrowedRaw]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// BorrowedRaw is a json.RawMessage that Decode does not copy: it points
// into the input, for a member read before the input is dropped (a
// mini-swe-agent message's extra, most of the trajectory).
type BorrowedRaw []byte

// UnmarshalJSON copies, as json.RawMessage does: encoding/json may reuse b.
func (r *BorrowedRaw) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

// Decode is json.Unmarshal(data, v) for v a pointer to a zero value.
func Decode(data []byte, v any) error {
	_, err := decode(data, v, false)
	return err
}

// DecodeFlags is Decode, also returning what jsonscan.String found in the
// strings of data (keys, values kept and values passed over), ORed, or -1
// when json.Unmarshal decoded data, which does not tell.
func DecodeFlags(data []byte, v any) (flags int, err error) {
	return decode(data, v, false)
}

// DecodeChecked is Decode for data a scan has checked already: a
// json.RawMessage member of a decoded record. Objects and arrays no field
// keeps are crossed without checking them again (jsonscan.Skip), and
// strings a quote at a time (jsonscan.Unscanned).
func DecodeChecked(data []byte, v any) error {
	_, err := decode(data, v, true)
	return err
}

func decode(data []byte, v any, checked bool) (int, error) {
	if selfDecoding(v) {
		return -1, json.Unmarshal(data, v)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		room := rooms.Get().(*[]byte)
		d := decoder{checked: checked, room: *room}
		end, err := d.value(data, jsonscan.SkipWS(data, 0), rv.Elem(), 1)
		*room = nil
		if cap(d.room) <= maxRoom {
			*room = d.room
		}
		rooms.Put(room)
		if err == nil && jsonscan.SkipWS(data, end) == len(data) {
			return d.flags, nil
		}
		rv.Elem().SetZero()
	}
	return -1, json.Unmarshal(data, v)
}

// rooms hold the room jsonscan.StringAt decodes strings with escapes in,
// up to maxRoom bytes, for the next record.
var rooms = sync.Pool{New: func() any { return new([]byte) }}

const maxRoom = 1 << 20

// DecodeString is json.Unmarshal(data, &s) for a string.
func DecodeString(data []byte, s *string) error {
	if v, ok := jsonscan.DecodeString(TrimWS(data)); ok {
		*s = v
		return nil
	}
	return json.Unmarshal(data, s)
}

// decoder decodes one value of JSON text.
type decoder struct {
	// checked says the text was checked already (DecodeChecked).
	checked bool
	// flags are what String found in the strings checked so far, ORed.
	flags int
	// room is jsonscan.StringAt's.
	room []byte
}

// value decodes the JSON value at data[i] into v and returns the offset
// past it, or errUndecided (or json.Unmarshal's error for a part it
// decoded). depth bounds the nesting it follows.
func (d *decoder) value(data []byte, i int, v reflect.Value, depth int) (int, error) {
	if i >= len(data) || depth > jsonscan.MaxDepth {
		return 0, errUndecided
	}
	if data[i] == 'n' {
		if len(data)-i < 4 || string(data[i:i+4]) != "null" {
			return 0, errUndecided
		}
		switch v.Kind() {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Struct:
			return i + 4, nil
		case reflect.Pointer:
			v.SetZero()
			return i + 4, nil
		case reflect.Slice:
			if v.Type() != rawMessageType && v.Type() != borrowedRawType {
				v.SetZero()
				return i + 4, nil
			}
		}
		return 0, errUndecided
	}
	switch v.Kind() {
	case reflect.String:
		if data[i] != '"' {
			return 0, errUndecided
		}
		if d.checked {
			end := jsonscan.Skip(data, i)
			v.SetString(jsonscan.StringValue(data[i:end], jsonscan.Unscanned))
			return end, nil
		}
		str, end, flags, room := jsonscan.StringAt(data, i, d.room)
		d.room = room
		if flags < 0 {
			return 0, errUndecided
		}
		d.flags |= flags
		v.SetString(str)
		return end, nil
	case reflect.Bool:
		switch {
		case len(data)-i >= 4 && string(data[i:i+4]) == "true":
			v.SetBool(true)
			return i + 4, nil
		case len(data)-i >= 5 && string(data[i:i+5]) == "false":
			v.SetBool(false)
			return i + 5, nil
		}
		return 0, errUndecided
	case reflect.Int, reflect.Int64:
		end, err := d.skip(data, i)
		if err != nil {
			return 0, err
		}
		n, perr := strconv.ParseInt(string(data[i:end]), 10, v.Type().Bits())
		if perr != nil || n == 0 && data[i] == '-' {
			return 0, errUndecided
		}
		v.SetInt(n)
		return end, nil
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return d.value(data, i, v.Elem(), depth)
	case reflect.Slice:
		if t := v.Type(); t == rawMessageType || t == borrowedRawType {
			end, err := d.skip(data, i)
			if err != nil {
				return 0, err
			}
			raw := data[i:end]
			if t == rawMessageType {
				raw = append([]byte(nil), raw...)
			}
			v.SetBytes(raw)
			return end, nil
		}
		if v.Type().Elem().Kind() == reflect.Struct && data[i] == '[' {
			return d.slice(data, i, v, depth)
		}
	case reflect.Struct:
		if info := structInfoOf(v.Type()); info != nil && data[i] == '{' {
			return d.object(data, i, v, info, depth)
		}
	}
	// Anything else (numbers of other kinds, maps, interfaces, base64
	// bytes, types with their own UnmarshalJSON) is encoding/json's, on
	// the value alone: it decodes a valid value the same out of its
	// record as in it.
	end, err := d.skip(data, i)
	if err != nil {
		return 0, err
	}
	return end, json.Unmarshal(data[i:end], v.Addr().Interface())
}

// skip returns the offset past the value at data[i], which no field
// keeps, checking it unless the text was checked.
func (d *decoder) skip(data []byte, i int) (int, error) {
	if d.checked {
		return jsonscan.Skip(data, i), nil
	}
	end, flags, st := jsonscan.Scanner{}.ValueFlags(data, i)
	if st != jsonscan.OK {
		return 0, errUndecided
	}
	d.flags |= flags
	return end, nil
}

// slice decodes the array at data[i] into v, a slice of structs.
func (d *decoder) slice(data []byte, i int, v reflect.Value, depth int) (int, error) {
	v.SetLen(0)
	i = jsonscan.SkipWS(data, i+1)
	if i < len(data) && data[i] == ']' {
		if v.IsNil() {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		}
		return i + 1, nil
	}
	for n := 0; ; n++ {
		v.Grow(1)
		v.SetLen(n + 1)
		end, err := d.value(data, i, v.Index(n), depth+1)
		if err != nil {
			return 0, err
		}
		i = jsonscan.SkipWS(data, end)
		if i >= len(data) {
			return 0, errUndecided
		}
		if data[i] == ']' {
			return i + 1, nil
		}
		if data[i] != ',' {
			return 0, errUndecided
		}
		i = jsonscan.SkipWS(data, i+1)
	}
}

// object decodes the object at data[i] into v, a struct described by
// info, member by member.
func (d *decoder) object(data []byte, i int, v reflect.Value, info *structInfo, depth int) (int, error) {
	i = jsonscan.SkipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return 0, errUndecided
		}
		kend, kflags := jsonscan.String(data, i)
		if kflags != 0 {
			return 0, errUndecided // invalid, escaped or non-ASCII: encoding/json folds it
		}
		key := data[i+1 : kend-1]
		j := jsonscan.SkipWS(data, kend)
		if j >= len(data) || data[j] != ':' {
			return 0, errUndecided
		}
		j = jsonscan.SkipWS(data, j+1)
		var end int
		var err error
		if fi, ok := info.byName[string(key)]; ok {
			end, err = d.value(data, j, v.FieldByIndex(fi), depth+1)
		} else if _, folds := info.folded[strings.ToLower(string(key))]; folds {
			return 0, errUndecided // encoding/json matches keys without case
		} else {
			end, err = d.skip(data, j)
		}
		if err != nil {
			return 0, err
		}
		i = jsonscan.SkipWS(data, end)
		if i >= len(data) {
			return 0, errUndecided
		}
		if data[i] == '}' {
			return i + 1, nil
		}
		if data[i] != ',' {
			return 0, errUndecided
		}
		i = jsonscan.SkipWS(data, i+1)
	}
}

// structInfo is how object finds a struct's fields.
type structInfo struct {
	byName map[string][]int    // JSON name -> field index path (embedded structs promote theirs)
	folded map[string]struct{} // lower-case JSON names
}

var structInfos sync.Map // reflect.Type -> *structInfo (nil: not handled)

// structInfoOf describes t, or returns nil for a struct object leaves
// to encoding/json: embedded pointers or tagged embedded structs, the
// ",string" option, names alike but for case (encoding/json's rules for
// those are its own), and types with their own UnmarshalJSON, in t or in
// its fields (BorrowedRaw aside).
func structInfoOf(t reflect.Type) *structInfo {
	if v, ok := structInfos.Load(t); ok {
		return v.(*structInfo)
	}
	info := &structInfo{byName: map[string][]int{}, folded: map[string]struct{}{}}
	if ownUnmarshal(t) || !info.add(t, nil) {
		info = nil
	}
	structInfos.Store(t, info)
	return info
}

// add adds the fields of t, found at index path prefix; false for a struct
// left to encoding/json.
func (info *structInfo) add(t reflect.Type, prefix []int) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		path := append(append([]int(nil), prefix...), i)
		if f.Anonymous {
			if tag != "" || f.Type.Kind() != reflect.Struct || !info.add(f.Type, path) {
				return false
			}
			continue
		}
		if strings.Contains(","+opts+",", ",string,") {
			return false
		}
		base := f.Type
		for base.Kind() == reflect.Pointer || base.Kind() == reflect.Slice && base != rawMessageType && base != borrowedRawType {
			base = base.Elem()
		}
		if base != borrowedRawType && base != rawMessageType && ownUnmarshal(base) {
			return false
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		lower := strings.ToLower(name)
		if _, dup := info.folded[lower]; dup {
			return false
		}
		info.byName[name] = path
		info.folded[lower] = struct{}{}
	}
	return true
}

// selfDecoding reports whether v has its own UnmarshalJSON, beyond those
// of the raw messages value copies or borrows itself.
func selfDecoding(v any) bool {
	switch v.(type) {
	case *json.RawMessage, *BorrowedRaw:
		return false
	case json.Unmarshaler:
		return true
	}
	return false
}

// ownUnmarshal reports whether t decodes itself (time.Time does).
func ownUnmarshal(t reflect.Type) bool {
	return t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}

// TrimWS drops the white space JSON allows around a value (bytes.TrimSpace
// would drop more).
func TrimWS(b []byte) []byte {
	b = b[jsonscan.SkipWS(b, 0):]
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
