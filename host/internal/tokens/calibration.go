package tokens

// Calibration bounds and smoothing.
const (
	CalibrationAlpha = 0.2
	CalibrationMin   = 0.5
	CalibrationMax   = 3.0
)

// Calibration is a per-model correction factor: reported tokens divided by
// estimated tokens, smoothed. The zero value is a factor of 1 with no samples.
type Calibration struct {
	factor  float64
	samples int
}

// Factor is the current multiplier for estimates.
func (c *Calibration) Factor() float64 {
	if c.samples == 0 {
		return 1
	}
	return c.factor
}

// Samples is how many reports have been observed.
func (c *Calibration) Samples() int { return c.samples }

// Observe feeds one report: the tokens the provider counted for a request
// whose estimate was estimated. The first report sets the factor outright so
// that a model whose tokenizer is far from chars/4 is corrected at once;
// later ones move it by an exponential moving average.
func (c *Calibration) Observe(estimated, reported int) {
	if estimated <= 0 || reported <= 0 {
		return
	}
	ratio := float64(reported) / float64(estimated)
	if c.samples == 0 {
		c.factor = ratio
	} else {
		c.factor = (1-CalibrationAlpha)*c.factor + CalibrationAlpha*ratio
	}
	c.factor = min(max(c.factor, CalibrationMin), CalibrationMax)
	c.samples++
}

// Apply scales an estimate by the factor.
func (c *Calibration) Apply(estimated int) int {
	if c.samples == 0 {
		return estimated
	}
	return int(float64(estimated)*c.factor + 0.5)
}
