//go:build race

package cli

// raceDetector: the race detector slows each compaction about tenfold, so
// the tests that repeat one run fewer times under it.
const raceDetector = true
