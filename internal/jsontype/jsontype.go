// Package jsontype names the JSON type a Go type decodes from, for error
// messages that say what was expected in the reader's terms, not Go's.
package jsontype

import "encoding/json"

// Expected is "a string", "an object", "an array", "a boolean" or "a
// number" for the type te wanted, or its Go name for anything else.
func Expected(te *json.UnmarshalTypeError) string {
	if te.Type == nil {
		return "another type"
	}
	switch te.Type.Kind().String() {
	case "string":
		return "a string"
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "float64", "float32", "uint", "uint64":
		return "a number"
	}
	return te.Type.String()
}
