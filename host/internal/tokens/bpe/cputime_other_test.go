//go:build !unix

package bpe

import "time"

// processCPU is unknown here; benchmarks report wall time only.
func processCPU() time.Duration { return -1 }
