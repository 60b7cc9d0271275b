package formats

import "github.com/compact-host/compact-host/host/internal/jsondecode"

// The readers decode records with jsondecode: the members they keep, at
// the speed of a scan, with json.Unmarshal's result and errors.

// borrowedRaw is a json.RawMessage that decode does not copy (see
// jsondecode.BorrowedRaw).
type borrowedRaw = jsondecode.BorrowedRaw

// decode is json.Unmarshal(data, v) for v a pointer to a zero value.
func decode(data []byte, v any) error { return jsondecode.Decode(data, v) }

// decodeChecked is decode for data a scan has checked already.
func decodeChecked(data []byte, v any) error { return jsondecode.DecodeChecked(data, v) }

// decodeString is json.Unmarshal(data, &s) for a string.
func decodeString(data []byte, s *string) error { return jsondecode.DecodeString(data, s) }
