package jsondecode

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upper decodes itself: Decode must leave it to encoding/json.
type upper string

func (u *upper) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*u = upper(strings.ToUpper(s))
	return nil
}

type record struct {
	Name  string          `json:"name"`
	Tags  []upper         `json:"tags"`
	Shout *upper          `json:"shout"`
	At    time.Time       `json:"at"`
	Raw   json.RawMessage `json:"raw"`
	Kept  BorrowedRaw     `json:"kept"`
	N     int             `json:"n"`
}

type plain struct {
	Name string          `json:"name"`
	Raw  json.RawMessage `json:"raw"`
	Kids []plain         `json:"kids"`
}

// Types with their own UnmarshalJSON decode as encoding/json decodes them,
// at the top and in fields; raw messages are still taken as they are.
func TestDecodeLeavesSelfDecodingTypesToEncodingJSON(t *testing.T) {
	for _, data := range []string{
		`{"name":"a","tags":["x","y"],"shout":"hey","at":"2026-01-02T03:04:05Z","raw":{"k":[1,2]},"kept":"s","n":3}`,
		`{"name":"a","at":"not a time"}`,
		`{"shout":5}`,
		`{"name":"b","raw":[true,null],"kids":[{"name":"c","raw":"x"}]}`,
	} {
		var want, got record
		wantErr := json.Unmarshal([]byte(data), &want)
		gotErr := Decode([]byte(data), &got)
		assert.Equal(t, wantErr, gotErr, data)
		assert.True(t, reflect.DeepEqual(want, got), "%s\njson:   %#v\nDecode: %#v", data, want, got)

		var wantU, gotU upper
		assert.Equal(t, json.Unmarshal([]byte(`"hi"`), &wantU), Decode([]byte(`"hi"`), &gotU))
		assert.Equal(t, wantU, gotU)

		var wantP, gotP plain
		require.Equal(t, json.Unmarshal([]byte(data), &wantP), Decode([]byte(data), &gotP))
		assert.True(t, reflect.DeepEqual(wantP, gotP), "%s", data)
	}
	assert.Nil(t, structInfoOf(reflect.TypeFor[record]()), "a struct with self-decoding fields is left to encoding/json")
	assert.NotNil(t, structInfoOf(reflect.TypeFor[plain]()), "raw messages are decoded here")
}
