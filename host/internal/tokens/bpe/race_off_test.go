//go:build !race

package bpe

// raceEnabled is set under the race detector; see skipLong.
const raceEnabled = false
