//go:build ignore

// gen.go derives models.json.gz from the models.dev facts file:
//
//	go run gen.go ../../../shared/data/models.json
//
// Only limits and prices are kept, in a compact form.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"log"
	"os"
	"sort"
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
	// provider -> model -> [context, input, output, in$, out$, cacheRead$, cacheWrite$]
	out := map[string]map[string][7]float64{}
	provs := make([]string, 0, len(src.Providers))
	for p := range src.Providers {
		provs = append(provs, p)
	}
	sort.Strings(provs)
	for _, p := range provs {
		out[p] = map[string][7]float64{}
		for id, m := range src.Providers[p] {
			out[p][id] = [7]float64{float64(m.Context), float64(m.Input), float64(m.Output), m.Cost.Input, m.Cost.Output, m.Cost.CacheRead, m.Cost.CacheWrite}
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
