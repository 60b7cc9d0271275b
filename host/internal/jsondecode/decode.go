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
	if selfDecoding(v) {
		return json.Unmarshal(data, v)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		if err := decodeValue(data, rv.Elem(), unchecked); err == nil {
			return nil
		}
		rv.Elem().SetZero()
	}
	return json.Unmarshal(data, v)
}

// DecodeChecked is Decode for data a scan has checked already: a
// json.RawMessage member of a decoded record. Objects and arrays in it are
// crossed without checking them again (jsonscan.Skip).
func DecodeChecked(data []byte, v any) error {
	if selfDecoding(v) {
		return json.Unmarshal(data, v)
	}
	flags := 0
	if t := TrimWS(data); len(t) > 0 && t[0] == '"' {
		flags = jsonscan.Unscanned
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		if err := decodeValue(data, rv.Elem(), flags); err == nil {
			return nil
		}
		rv.Elem().SetZero()
	}
	return json.Unmarshal(data, v)
}

// DecodeString is json.Unmarshal(data, &s) for a string.
func DecodeString(data []byte, s *string) error {
	if v, ok := jsonscan.DecodeString(TrimWS(data)); ok {
		*s = v
		return nil
	}
	return json.Unmarshal(data, s)
}

// unchecked says decodeValue's data has not been checked; other values
// are jsonscan.String's flags of a checked string, or 0 for a checked
// value of another kind.
const unchecked = -2

// decodeValue decodes the JSON value that is all of data (white space
// around it allowed) into v, or returns errUndecided.
func decodeValue(data []byte, v reflect.Value, flags int) error {
	data = TrimWS(data)
	if len(data) == 0 {
		return errUndecided
	}
	if string(data) == "null" {
		switch v.Kind() {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Struct:
			return nil
		case reflect.Pointer:
			v.SetZero()
			return nil
		case reflect.Slice:
			if v.Type() != rawMessageType && v.Type() != borrowedRawType {
				v.SetZero()
				return nil
			}
		}
		return errUndecided
	}
	switch v.Kind() {
	case reflect.String:
		if flags == unchecked || data[0] != '"' {
			s, ok := jsonscan.DecodeString(data)
			if !ok {
				return errUndecided
			}
			v.SetString(s)
			return nil
		}
		v.SetString(jsonscan.StringValue(data, flags))
		return nil
	case reflect.Bool:
		switch string(data) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			return errUndecided
		}
		return nil
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(string(data), 10, v.Type().Bits())
		if err != nil || n == 0 && data[0] == '-' {
			return errUndecided
		}
		v.SetInt(n)
		return nil
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return decodeValue(data, v.Elem(), flags)
	case reflect.Slice:
		if t := v.Type(); t == rawMessageType || t == borrowedRawType {
			if flags == unchecked {
				if end, st := (jsonscan.Scanner{}).Value(data, 0); st != jsonscan.OK || end != len(data) {
					return errUndecided
				}
			}
			if t == rawMessageType {
				data = append([]byte(nil), data...)
			}
			v.SetBytes(data)
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Struct && data[0] == '[' {
			return decodeSlice(data, v, flags != unchecked)
		}
	case reflect.Struct:
		if data[0] == '{' {
			return decodeStruct(data, v, flags != unchecked)
		}
	}
	return json.Unmarshal(data, v.Addr().Interface())
}

// decodeSlice decodes an array of structs; checked says the array was
// checked already, as a member of the object it is in.
func decodeSlice(data []byte, v reflect.Value, checked bool) error {
	if !checked && (jsonscan.Scanner{}).Valid(data) != jsonscan.OK {
		return errUndecided
	}
	v.SetLen(0)
	i := jsonscan.SkipWS(data, 1)
	for n := 0; data[i] != ']'; n++ {
		end := jsonscan.Skip(data, i) // checked by now
		v.Grow(1)
		v.SetLen(n + 1)
		flags := 0
		if data[i] == '"' {
			flags = jsonscan.Unscanned // checked by now
		}
		if err := decodeValue(data[i:end], v.Index(n), flags); err != nil {
			return err
		}
		i = jsonscan.SkipWS(data, end)
		if data[i] == ',' {
			i = jsonscan.SkipWS(data, i+1)
		}
	}
	if v.IsNil() {
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	}
	return nil
}

// decodeStruct decodes an object into a struct, member by member; checked
// says the object was checked already, as a member of the one it is in.
func decodeStruct(data []byte, v reflect.Value, checked bool) error {
	info := structInfoOf(v.Type())
	if info == nil {
		return errUndecided
	}
	var buf [24]jsonscan.Member
	members, st := jsonscan.Scanner{Checked: checked}.Members(data, buf[:0])
	if st != jsonscan.OK {
		return errUndecided
	}
	for _, m := range members {
		if m.KeyFlags != 0 {
			return errUndecided // escaped or non-ASCII: encoding/json folds it
		}
		fi, ok := info.byName[string(m.Key)]
		if !ok {
			if _, folds := info.folded[strings.ToLower(string(m.Key))]; folds {
				return errUndecided // encoding/json matches keys without case
			}
			continue
		}
		if err := decodeValue(data[m.Start:m.End], v.FieldByIndex(fi), max(m.ValFlags, 0)); err != nil {
			return err
		}
	}
	return nil
}

// structInfo is how decodeStruct finds a struct's fields.
type structInfo struct {
	byName map[string][]int    // JSON name -> field index path (embedded structs promote theirs)
	folded map[string]struct{} // lower-case JSON names
}

var structInfos sync.Map // reflect.Type -> *structInfo (nil: not handled)

// structInfoOf describes t, or returns nil for a struct decodeStruct leaves
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
// of the raw messages decodeValue copies or borrows itself.
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
