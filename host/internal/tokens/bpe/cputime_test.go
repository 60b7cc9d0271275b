//go:build unix

package bpe

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the user and system time of the process: on a machine that
// others load, a benchmark's CPU time says more than its wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU runs f b.N times and reports its CPU time per op and the
// throughput it gives for size bytes per op.
func reportCPU(b *testing.B, size int, f func()) {
	b.ReportAllocs()
	if size > 0 {
		b.SetBytes(int64(size))
	}
	start := cpuTime()
	for b.Loop() {
		f()
	}
	cpu := cpuTime() - start
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	if size > 0 && cpu > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/cpu.Seconds()/1e6, "MB/cpu-s")
	}
}
