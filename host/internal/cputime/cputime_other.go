//go:build !unix

package cputime

import "time"

// Process is unknown here: -1, and benchmarks report wall time only.
func Process() time.Duration { return -1 }
