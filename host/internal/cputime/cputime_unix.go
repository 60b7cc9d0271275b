//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time the process has used, user and system, or -1
// when it cannot be read.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
