//go:build unix

package bpe

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used, user and system: on a
// shared machine it measures the work where wall time measures the queue.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
