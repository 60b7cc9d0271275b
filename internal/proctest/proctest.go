// Package proctest checks, in tests, that a process a test started by way
// of the code under test is gone: killed and reaped.
package proctest

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ReadPID waits up to within for the process ID a test program writes to
// path, and returns it.
func ReadPID(t testing.TB, path string, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process ID in %s after %s", path, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RequireGone fails the test unless the process pid is gone (signal 0
// finds no such process) within the bound: a bound on a kill and a reap
// the code under test must make, not a measure of its speed.
func RequireGone(t testing.TB, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still exists %s after the stop", pid, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
