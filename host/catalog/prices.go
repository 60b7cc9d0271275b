package catalog

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Prices are what one model's tokens cost, in USD per million tokens,
// with every price set: a provider that lists no cache write price bills
// writes as plain input, one that lists no cache read price gives no
// discount, and one without a 1-hour tier bills it as the 5-minute write.
type Prices struct {
	Input     float64 `json:"input"`
	Output    float64 `json:"output"`
	CacheRead float64 `json:"cache_read"`
	// CacheWrite5m and CacheWrite1h price a prompt-cache write kept for
	// five minutes or for an hour of inactivity.
	CacheWrite5m float64 `json:"cache_write_5m"`
	CacheWrite1h float64 `json:"cache_write_1h"`
}

// Known reports whether p holds any price at all.
func (p Prices) Known() bool { return p.Input > 0 || p.Output > 0 }

// Prices are the model's prices with the gaps filled (see Prices).
func (m Model) Prices() Prices {
	p := Prices{Input: m.InputPrice, Output: m.OutputPrice, CacheRead: m.CacheReadPrice,
		CacheWrite5m: m.CacheWritePrice, CacheWrite1h: m.CacheWrite1hPrice}
	return p.filled()
}

func (p Prices) filled() Prices {
	if p.CacheRead == 0 {
		p.CacheRead = p.Input
	}
	if p.CacheWrite5m == 0 {
		p.CacheWrite5m = p.Input
	}
	if p.CacheWrite1h == 0 {
		p.CacheWrite1h = p.CacheWrite5m
	}
	return p
}

// ErrBadPrices: a price list that ParsePrices cannot read.
var ErrBadPrices = errors.New("catalog: bad price list")

// maxPrice bounds a price (USD per million tokens); the dearest model
// listed costs a few hundred.
const maxPrice = 100_000

// ParsePrices reads prices written as comma-separated key=value pairs in
// USD per million tokens, e.g.
//
//	input=3,output=15,cache_read=0.3,cache_write=3.75,cache_write_1h=6
//
// input and output are required; a missing cache price is filled as in
// Prices.
func ParsePrices(s string) (Prices, error) {
	if len(s) > 512 {
		return Prices{}, fmt.Errorf("%w: %d bytes, at most 512", ErrBadPrices, len(s))
	}
	var p Prices
	fields := map[string]*float64{"input": &p.Input, "output": &p.Output, "cache_read": &p.CacheRead,
		"cache_write": &p.CacheWrite5m, "cache_write_1h": &p.CacheWrite1h}
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		dst := fields[k]
		if !ok || dst == nil {
			return Prices{}, fmt.Errorf("%w: %q is not key=value with a key of input, output, cache_read, cache_write, cache_write_1h", ErrBadPrices, kv)
		}
		if seen[k] {
			return Prices{}, fmt.Errorf("%w: %s is given twice", ErrBadPrices, k)
		}
		seen[k] = true
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > maxPrice {
			return Prices{}, fmt.Errorf("%w: %s=%q is not a price from 0 to %d USD per million tokens", ErrBadPrices, k, v, maxPrice)
		}
		*dst = f
	}
	if !seen["input"] || !seen["output"] {
		return Prices{}, fmt.Errorf("%w: input and output are required, e.g. input=3,output=15", ErrBadPrices)
	}
	return p.filled(), nil
}
