//go:build !wasm

package truncate

import "bytes"

func countNewlines(b []byte) int { return bytes.Count(b, []byte{'\n'}) }
