package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/spf13/cobra"
)

// costFlags choose the prices and the prompt cache's lifetime that money
// figures are worked out with.
type costFlags struct {
	price    string
	cacheTTL string
}

func addCostFlags(cmd *cobra.Command, f *costFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.price, "price", "", "the agent's model's prices in USD per million tokens, for a model the catalog lacks or in place of its figures: input=3,output=15,cache_read=0.3,cache_write=3.75[,cache_write_1h=6]")
	fl.StringVar(&f.cacheTTL, "cache-ttl", "", "the prompt cache's lifetime, 5m or 1h (default: the one of the file's latest cache write, else 5m)")
}

// costSetting is costFlags checked.
type costSetting struct {
	prices cost.Prices   // from --price; zero when not given
	ttl    time.Duration // from --cache-ttl; 0 when not given
}

func (f costFlags) parse() (costSetting, error) {
	var c costSetting
	if f.price != "" {
		p, err := catalog.ParsePrices(f.price)
		if err != nil {
			return c, usageError{fmt.Errorf("--price: %w", err)}
		}
		c.prices = p
	}
	switch f.cacheTTL {
	case "":
	case "5m":
		c.ttl = cost.TTL5m
	case "1h":
		c.ttl = cost.TTL1h
	default:
		return c, usageError{fmt.Errorf("--cache-ttl %q: want 5m or 1h", f.cacheTTL)}
	}
	return c, nil
}

// pricesFor are the prices of model: --price, else the catalog's.
func (c costSetting) pricesFor(model string) (cost.Prices, string, bool) {
	if c.prices.Known() {
		return c.prices, "--price", true
	}
	if m, ok := catalog.Lookup(model); ok && model != "" && m.InputPrice > 0 {
		return m.Prices(), "catalog", true
	}
	return cost.Prices{}, "", false
}

// ttlOf is the cache lifetime: --cache-ttl, else the one the latest
// recorded cache write used, else 5 minutes.
func (c costSetting) ttlOf(reqs []cost.Request) time.Duration {
	if c.ttl > 0 {
		return c.ttl
	}
	for i := len(reqs) - 1; i >= 0; i-- {
		if r := reqs[i]; r.CacheWrite1h > 0 {
			return cost.TTL1h
		} else if r.CacheWrite5m > 0 {
			return cost.TTL5m
		}
	}
	return cost.TTL5m
}

func ttlName(ttl time.Duration) string {
	if ttl >= cost.TTL1h {
		return "1h"
	}
	return "5m"
}

// fileCost is what the model calls a file records usage of were billed.
type fileCost struct {
	// Requests counts the calls; Unpriced those of a model with no
	// prices (see Models), which the bill leaves out.
	Requests    int       `json:"requests"`
	Unpriced    int       `json:"unpriced,omitempty"`
	Models      []string  `json:"models"`
	PriceSource string    `json:"price_source,omitempty"`
	Billed      cost.Bill `json:"billed"`
	// LastRequest is when the latest call was sent.
	LastRequest time.Time `json:"last_request,omitzero"`
}

// billFile bills recorded calls, each at its own model's prices, or at
// fallbackModel's for a call whose model is not recorded.
func billFile(c costSetting, reqs []cost.Request, fallbackModel string) *fileCost {
	if len(reqs) == 0 {
		return nil
	}
	fc := &fileCost{Requests: len(reqs)}
	for _, r := range reqs {
		model := r.Model
		if model == "" {
			model = fallbackModel
		}
		if model != "" && !slices.Contains(fc.Models, model) {
			fc.Models = append(fc.Models, model)
		}
		p, src, ok := c.pricesFor(model)
		if !ok {
			fc.Unpriced++
			continue
		}
		fc.PriceSource = src
		fc.Billed.Add(p, r)
		if r.Time.After(fc.LastRequest) {
			fc.LastRequest = r.Time
		}
	}
	return fc
}

func (fc *fileCost) print(w io.Writer) {
	b := fc.Billed
	prices := fc.PriceSource + " prices"
	if fc.PriceSource == "" {
		prices = "no prices"
	}
	fmt.Fprintf(w, "cost: $%.4f billed for %d model calls the file records (%s, %s)\n", b.USD, b.Requests, strings.Join(fc.Models, ", "), prices)
	fmt.Fprintf(w, "  tokens: %s input · %s cache reads · %s cache writes (5m) · %s cache writes (1h) · %s output\n",
		num(b.Input), num(b.CacheRead), num(b.CacheWrite5m), num(b.CacheWrite1h), num(b.Output))
	if fc.Unpriced > 0 {
		fmt.Fprintf(w, "  %d calls left out: no prices for their model (pass --price input=…,output=…)\n", fc.Unpriced)
	}
}

// compactCost is what a compaction costs an agent whose prompt it
// rewrites: the summary calls, and the cache write of the new prefix on
// its next request.
type compactCost struct {
	cost.Compaction
	Model       string `json:"model"`
	PriceSource string `json:"price_source"`
	CacheTTL    string `json:"cache_ttl"`
	// Cache is "warm" or "expired" from the time of the latest request
	// the file records; "unknown" (priced as warm) when it records none.
	Cache string `json:"cache"`
}

// priceCompaction prices a compaction of a prompt of before tokens to
// after, whose summary calls cost summaryUSD, for the agent's model
// (or the model the file's latest call used) at now; nil without prices.
func priceCompaction(c costSetting, model string, reqs []cost.Request, before, after int, summaryUSD float64, now time.Time) *compactCost {
	var last cost.Request
	if len(reqs) > 0 {
		last = reqs[len(reqs)-1]
	}
	if model == "" {
		model = last.Model
	}
	p, src, ok := c.pricesFor(model)
	if !ok {
		return nil
	}
	ttl := c.ttlOf(reqs)
	cc := &compactCost{Model: model, PriceSource: src, CacheTTL: ttlName(ttl), Cache: "unknown"}
	warm := true
	if !last.Time.IsZero() {
		warm = now.Sub(last.Time) <= ttl
		cc.Cache = map[bool]string{true: "warm", false: "expired"}[warm]
	}
	cc.Compaction = cost.PriceCompaction(p, ttl, before, after, summaryUSD, warm)
	return cc
}

func (cc *compactCost) print(w io.Writer, dryRun bool) {
	summary := fmt.Sprintf("$%.4f for the summary", cc.SummaryUSD)
	if dryRun {
		summary = "the summary call (not priced in a dry run)"
	}
	fmt.Fprintf(w, "cost: %s + $%.4f to write the new prompt to the cache (%s TTL, %s prices of %s); the %s cache would cost $%.4f on the next request\n",
		summary, cc.RewriteUSD, cc.CacheTTL, cc.PriceSource, cc.Model, cc.Cache, cc.UncompactedUSD)
	switch n := cc.BreakEvenRequests; {
	case n == 0:
		fmt.Fprintln(w, "  it never pays back: it frees nothing a later request would read")
	case n == 1:
		fmt.Fprintf(w, "  it pays back on the next request, then saves $%.4f a request\n", cc.SavedPerRequestUSD)
	default:
		fmt.Fprintf(w, "  it pays back after %d requests on a warm cache, saving $%.4f a request\n", n, cc.SavedPerRequestUSD)
	}
}
