//go:build ignore

// gen.go derives models.json.gz from the models.dev facts file:
//
//	go run gen.go ../../../shared/data/models.json
//
// Only limits and prices are kept, in a compact form. models.dev lists one
// cache write price, the 5-minute one; the 1-hour write is derived here
// (cacheWrite1h).
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"log"
	"os"
	"sort"
	"strings"
)

type source struct {
	Providers map[string]map[string]struct {
		Context int `json:"context"`
		Input   int `json:"input"`
		Output  int `json:"output"`
		Cost    struct {
			Input      float64 `json:"input"`
			Output     float64 `json:"output"`
			CacheRead  float64 `json:"cache_read"`
			CacheWrite float64 `json:"cache_write"`
		} `json:"cost"`
	} `json:"providers"`
}

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: go run gen.go PATH/models.json")
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	var src source
	if err := json.Unmarshal(raw, &src); err != nil {
		log.Fatal(err)
	}
	// provider -> model -> [context, input, output, in$, out$, cacheRead$, cacheWrite5m$, cacheWrite1h$]
	out := map[string]map[string][8]float64{}
	provs := make([]string, 0, len(src.Providers))
	for p := range src.Providers {
		provs = append(provs, p)
	}
	sort.Strings(provs)
	for _, p := range provs {
		out[p] = map[string][8]float64{}
		for id, m := range src.Providers[p] {
			c := m.Cost
			out[p][id] = [8]float64{float64(m.Context), float64(m.Input), float64(m.Output), c.Input, c.Output, c.CacheRead, c.CacheWrite,
				cacheWrite1h(id, c.Input, c.CacheWrite)}
		}
	}
	js, err := json.Marshal(out)
	if err != nil {
		log.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(js)
	zw.Close()
	if err := os.WriteFile("models.json.gz", buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}

// cacheWrite1h is the price of a cache write kept for an hour. Anthropic
// documents it at twice the base input price for every Claude model, at
// every provider that resells them with prompt caching (those list the
// 5-minute write at 1.25x input). Other makers either cache automatically
// with no write premium (OpenAI, Gemini) or publish no TTL tier: their
// 1-hour price is the write price they list, 0 when they list none.
func cacheWrite1h(id string, input, write5m float64) float64 {
	if write5m > 0 && strings.Contains(strings.ToLower(id), "claude") {
		return 2 * input
	}
	return write5m
}
