package eval

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProbeMatchers checks each kind of matcher against a summary that
// answers it and one that does not.
func TestProbeMatchers(t *testing.T) {
	cases := []struct {
		name     string
		probe    Probe
		yes, not string
	}{
		{"all_of", Probe{Category: CategoryFact, Question: "q", AllOf: []string{"AttributeError", "PixelRepresentation"}},
			"Running it raised an attributeerror:\n  `PixelRepresentation` missing.", "It raised an AttributeError."},
		{"any_of", Probe{Category: CategoryNextStep, Question: "q", AnyOf: []string{"re-run", "verify"}},
			"Next: VERIFY the fix.", "Next: submit."},
		{"regex", Probe{Category: CategoryDecision, Question: "q", Regex: []string{`_order[^.]{0,40}after\s+alterorderwithrespectto`}},
			"Indexes on _order are added after `AlterOrderWithRespectTo`.", "Indexes on _order are added before AlterOrderWithRespectTo, after the model."},
		{"file_change", Probe{Category: CategoryFileChange, Question: "q", Path: "handlers/numpy_handler.py", AnyOf: []string{"required_elements"}},
			"Modified /repo/pixel_data_handlers/numpy_handler.py: required_elements gains PixelRepresentation only for PixelData.",
			"Modified numpy_handler.py: required_elements changed."},
		{"whitespace", Probe{Category: CategoryFact, Question: "q", AllOf: []string{"required   elements are\nmissing"}},
			"the following required\n\telements are missing", "the following required elements were missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.probe.compile())
			assert.True(t, c.probe.Answered(c.yes), "should answer: %q", c.yes)
			assert.False(t, c.probe.Answered(c.not), "should not answer: %q", c.not)
		})
	}
}

func TestProbeFileErrors(t *testing.T) {
	cases := map[string]string{
		"unknown category": `{"session":"s.jsonl","points":[{"id":"p","at":3,"probes":[{"id":"a","category":"facts","question":"q","any_of":["x"]}]}]}`,
		"no matcher":       `{"session":"s.jsonl","points":[{"id":"p","at":3,"probes":[{"id":"a","category":"fact","question":"q"}]}]}`,
		"file_change path": `{"session":"s.jsonl","points":[{"id":"p","at":3,"probes":[{"id":"a","category":"file_change","question":"q","any_of":["x"]}]}]}`,
		"bad regex":        `{"session":"s.jsonl","points":[{"id":"p","at":3,"probes":[{"id":"a","category":"fact","question":"q","regex":["("]}]}]}`,
		"empty substring":  `{"session":"s.jsonl","points":[{"id":"p","at":3,"probes":[{"id":"a","category":"fact","question":"q","any_of":[" "]}]}]}`,
		"no point":         `{"session":"s.jsonl","points":[{"id":"p","probes":[{"id":"a","category":"fact","question":"q","any_of":["x"]}]}]}`,
		"duplicate id":     `{"session":"s.jsonl","points":[{"id":"p","at":3,"probes":[{"id":"a","category":"fact","question":"q","any_of":["x"]},{"id":"a","category":"fact","question":"q","any_of":["y"]}]}]}`,
		"unknown field":    `{"session":"s.jsonl","points":[{"id":"p","at":3,"probes":[{"id":"a","category":"fact","question":"q","anyof":["x"]}]}]}`,
		"directory":        `{"session":"corpus/s.jsonl","points":[{"id":"p","at":3,"probes":[{"id":"a","category":"fact","question":"q","any_of":["x"]}]}]}`,
	}
	dir := t.TempDir()
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "p.json")
			require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
			_, err := LoadProbes(path)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrBadProbes)
			assert.Contains(t, err.Error(), path, "the error names the file")
		})
	}
}

func TestProbePointMarker(t *testing.T) {
	msgs := []abi.Message{
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Fix the bug"}}},
		{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "Reading the   handler now"}}},
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "ok"}}},
	}
	set := &ProbeSet{Session: "s", File: "s.json", Points: []ProbePoint{{ID: "p", After: "reading the handler"}}}
	require.NoError(t, set.Resolve(msgs))
	assert.Equal(t, 2, set.Points[0].At)

	set.Points[0].At = 3
	err := set.Resolve(msgs)
	require.Error(t, err, "an index that disagrees with the marker")
	assert.ErrorIs(t, err, ErrBadProbes)

	set = &ProbeSet{Session: "s", File: "s.json", Points: []ProbePoint{{ID: "p", At: 4}}}
	assert.ErrorIs(t, set.Resolve(msgs), ErrBadProbes, "a point past the session's end")
}

// TestProbeFilesLoad checks the committed probe files: they parse, and
// together they hold enough probes of every category.
func TestProbeFilesLoad(t *testing.T) {
	sets, err := LoadProbes(filepath.Join("testdata", "probes"))
	require.NoError(t, err)
	require.NotEmpty(t, sets)
	perCategory := map[string]int{}
	for _, s := range sets {
		for _, p := range s.Points {
			for _, q := range p.Probes {
				perCategory[q.Category]++
			}
		}
	}
	for _, c := range ProbeCategories {
		assert.Positive(t, perCategory[c], "category %s has probes", c)
	}
}
