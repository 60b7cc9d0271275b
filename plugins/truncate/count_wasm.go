//go:build wasm

package truncate

func countNewlines(b []byte) int { return countByteSWAR(b, '\n') }
