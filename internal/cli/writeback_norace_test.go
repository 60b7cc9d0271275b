//go:build !race

package cli

// raceDetector: see writeback_race_test.go.
const raceDetector = false
