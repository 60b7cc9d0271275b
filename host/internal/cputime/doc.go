// Package cputime reads the process's CPU time for the benchmarks: on a
// shared machine it measures the work where wall time measures the queue.
package cputime
