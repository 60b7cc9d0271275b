// Package catalog is the embedded model catalog: context windows, output
// limits and prices, derived from models.dev (see gen.go).
package catalog

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"io"
	"sort"
	"strings"
	"sync"
)

// models.json.gz is rebuilt with: go run gen.go ../../../shared/data/models.json
//
//go:embed models.json.gz
var packed []byte

// Model is what the catalog knows of one model.
type Model struct {
	Provider string
	ID       string
	// ContextWindow is the total tokens of input and output.
	ContextWindow int
	// InputLimit is a separate cap on input tokens, 0 when the provider
	// states none.
	InputLimit int
	// MaxOutput is the largest completion the model produces.
	MaxOutput int
	// Prices in USD per million tokens, as the provider lists them: 0
	// where it lists none. CacheWritePrice is the 5-minute write,
	// CacheWrite1hPrice the 1-hour one. Prices fills the gaps.
	InputPrice, OutputPrice, CacheReadPrice, CacheWritePrice, CacheWrite1hPrice float64
}

// InputBudget is the input a request may carry while leaving room for
// maxOutput tokens of reply: the context window less the output reserve,
// and never more than the input limit. maxOutput <= 0 reserves the model's
// own output limit.
func (m Model) InputBudget(maxOutput int) int {
	if maxOutput <= 0 {
		maxOutput = m.MaxOutput
	}
	b := m.ContextWindow - maxOutput
	if m.InputLimit > 0 && (b <= 0 || m.InputLimit < b) {
		b = m.InputLimit
	}
	return b
}

var (
	loadOnce sync.Once
	byKey    map[string]Model   // "provider/id"
	byID     map[string][]Model // "id"
)

// firstParty orders the providers whose figures win for a bare model ID.
var firstParty = []string{"anthropic", "openai", "google", "mistral", "deepseek", "xai", "groq", "amazon-bedrock", "azure", "openrouter"}

func load() {
	zr, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		panic("catalog: embedded data is corrupt: " + err.Error())
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		panic("catalog: embedded data is corrupt: " + err.Error())
	}
	var data map[string]map[string][8]float64
	if err := json.Unmarshal(raw, &data); err != nil {
		panic("catalog: embedded data is corrupt: " + err.Error())
	}
	rank := func(p string) int {
		for i, f := range firstParty {
			if f == p {
				return i
			}
		}
		return len(firstParty)
	}
	byKey = map[string]Model{}
	byID = map[string][]Model{}
	for p, models := range data {
		for id, v := range models {
			m := Model{Provider: p, ID: id, ContextWindow: int(v[0]), InputLimit: int(v[1]), MaxOutput: int(v[2]),
				InputPrice: v[3], OutputPrice: v[4], CacheReadPrice: v[5], CacheWritePrice: v[6], CacheWrite1hPrice: v[7]}
			byKey[p+"/"+id] = m
			lid := strings.ToLower(id)
			byID[lid] = append(byID[lid], m)
		}
	}
	for _, ms := range byID {
		sort.Slice(ms, func(i, j int) bool {
			ri, rj := rank(ms[i].Provider), rank(ms[j].Provider)
			if ri != rj {
				return ri < rj
			}
			return ms[i].Provider < ms[j].Provider
		})
	}
}

// Lookup finds a model by "provider/id" or by bare ID. A bare ID present at
// several providers resolves to the model's own maker where the catalog has
// it. Lookup is case-insensitive for bare IDs.
func Lookup(name string) (Model, bool) {
	loadOnce.Do(load)
	if m, ok := byKey[name]; ok {
		return m, true
	}
	if ms := byID[strings.ToLower(name)]; len(ms) > 0 {
		return ms[0], true
	}
	// "provider/vendor/model" style names used by routers.
	if i := strings.LastIndex(name, "/"); i >= 0 {
		if ms := byID[strings.ToLower(name[i+1:])]; len(ms) > 0 {
			return ms[0], true
		}
	}
	return Model{}, false
}

// Len is the number of models in the catalog.
func Len() int {
	loadOnce.Do(load)
	return len(byKey)
}

// agentOverhead is what each agent adds to every request besides the
// conversation (system prompt, tool schemas, per-request context), in
// tokens, by session format name; measured from the usage the agents
// record (see RATIONALE.md, "The live context of an agent's file").
var agentOverhead = map[string]int{
	"claude-code": 19_000,
	"codex":       4_000,
	"gemini-cli":  6_500,
	"opencode":    8_500,
}

// AgentOverhead is the default fixed overhead of the agent whose session
// format is named format, and whether it is known.
func AgentOverhead(format string) (int, bool) {
	n, ok := agentOverhead[format]
	return n, ok
}

// summaryModels are the models a provider's summaries default to when
// they cost less than the conversation's own.
var summaryModels = map[string]string{"anthropic": "claude-haiku-4-5", "openai": "gpt-4.1-mini", "google": "gemini-2.5-flash-lite"}

// SummaryModel is the model a compaction asks its summaries of by default
// for a conversation with model m: its provider's small model when the
// catalog prices that lower, else m's own ID.
func SummaryModel(m Model) string {
	if c, ok := Lookup(summaryModels[m.Provider]); ok && c.InputPrice < m.InputPrice {
		return c.ID
	}
	return m.ID
}
