package tokens

import "math"

// Calibration bounds and smoothing.
const (
	CalibrationAlpha = 0.2
	CalibrationMin   = 0.5
	CalibrationMax   = 3.0
)

// minSlopeStep is the smallest change of the estimate between two reports
// that measures a slope, whatever the context's size.
const minSlopeStep = 200

// seedMaxRatio is the largest first ratio read as a tokenizer
// difference. Tokenizers differ from chars/4 by tens of percent; a first
// report several times the estimate is a prompt the estimate never saw.
const seedMaxRatio = 1.5

// Calibration corrects estimates with what a provider reports:
//
//	reported ≈ Factor × estimated + Offset
//
// Factor is the tokenizer's ratio to the estimator; Offset is what every
// request carries that the estimate never sees (a system prompt or tool
// schemas outside the session). A factor alone would read a fixed 40,000-
// token system prompt as a ratio, and be far off once a compaction shrinks
// the context.
//
// The first report sets Factor to its ratio when that is a plausible
// tokenizer ratio (at most 1.5); a larger first ratio sets Factor to 1 and
// puts the difference in Offset. A later report whose estimate moved by a
// fifth of the context or more (a compaction, a large tool output) gives
// a slope, Δreported / Δestimated, clamped to [0.5, 3.0], that Factor
// follows as an exponential moving average with alpha 0.2; smaller steps
// measure the noise of single messages, not the slope. Offset follows each
// report's residual by the same average, so one odd report moves the
// estimate a fifth of the way, not all of it. The zero value is identity.
type Calibration struct {
	factor, offset float64
	samples        int
	lastEst        int
	lastRep        int
}

// Factor is the current multiplier for estimates.
func (c *Calibration) Factor() float64 {
	if c.samples == 0 {
		return 1
	}
	return c.factor
}

// Offset is the tokens every request carries beyond its estimate.
func (c *Calibration) Offset() int { return int(math.Round(c.offset)) }

// Samples is how many reports have been observed.
func (c *Calibration) Samples() int { return c.samples }

func clampFactor(f float64) float64 { return min(max(f, CalibrationMin), CalibrationMax) }

// Observe feeds one report: the tokens the provider counted for a request
// whose estimate was estimated.
func (c *Calibration) Observe(estimated, reported int) {
	if estimated <= 0 || reported <= 0 {
		return
	}
	est, rep := float64(estimated), float64(reported)
	if c.samples == 0 {
		if ratio := rep / est; ratio <= seedMaxRatio {
			c.factor = clampFactor(ratio)
		} else {
			c.factor = 1
		}
		c.offset = rep - c.factor*est
	} else {
		if step := estimated - c.lastEst; abs(step) >= max(minSlopeStep, max(estimated, c.lastEst)/5) {
			slope := clampFactor(float64(reported-c.lastRep) / float64(step))
			c.factor = (1-CalibrationAlpha)*c.factor + CalibrationAlpha*slope
		}
		c.offset = (1-CalibrationAlpha)*c.offset + CalibrationAlpha*(rep-c.factor*est)
	}
	c.samples++
	c.lastEst, c.lastRep = estimated, reported
}

// Apply corrects an estimate.
func (c *Calibration) Apply(estimated int) int {
	if c.samples == 0 {
		return estimated
	}
	return max(0, int(float64(estimated)*c.factor+c.offset+0.5))
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
