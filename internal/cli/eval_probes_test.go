package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probeFile is a probe set over the project's sample session: one probe
// any summary of the first messages answers (the request), one none can
// (a word the session never uses).
const probeFile = `{
  "session": "bugfix.jsonl",
  "points": [{"id": "start", "at": 10, "probes": [
    {"id": "task", "category": "fact", "question": "What is the bug?", "all_of": ["double-counts refunds"]},
    {"id": "absent", "category": "next_step", "question": "A step the session never names", "all_of": ["xylophone"]}
  ]}]
}`

func TestEvalProbes(t *testing.T) {
	session := sampleSession(t)
	probes := writeFile(t, "bugfix.json", probeFile)

	res := runCLI(t, runOpts{}, "eval", "--probes", probes, "--in-process", "--json", session)
	require.Equal(t, ExitOK, res.code, res.stderr)
	var rep struct {
		Strategy string `json:"strategy"`
		Total    struct {
			Probes   int `json:"probes"`
			Answered int `json:"answered"`
		} `json:"total"`
		Categories []struct {
			Name     string `json:"name"`
			Probes   int    `json:"probes"`
			Answered int    `json:"answered"`
		} `json:"categories"`
		Points []struct {
			Folded int `json:"folded"`
		} `json:"points"`
		AgentComparisons []any `json:"agent_comparisons"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep))
	assert.NotNil(t, rep.AgentComparisons, "an empty list, not null, where the session holds no agent compaction")
	assert.Empty(t, rep.AgentComparisons)
	assert.Equal(t, "structured", rep.Strategy)
	assert.Equal(t, 2, rep.Total.Probes)
	assert.Equal(t, 1, rep.Total.Answered)
	require.Len(t, rep.Points, 1)
	assert.Positive(t, rep.Points[0].Folded)

	res = runCLI(t, runOpts{}, "eval", "--probes", probes, "--in-process", session)
	require.Equal(t, ExitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "next_step")
	assert.Contains(t, res.stdout, "Not answered:")

	res = runCLI(t, runOpts{}, "eval", "--probes", probes, "--in-process", "--min-score", "50", session)
	assert.Equal(t, ExitOK, res.code, "half answered meets 50%%: %s", res.stderr)
	res = runCLI(t, runOpts{}, "eval", "--probes", probes, "--in-process", "--min-score", "60", session)
	assert.Equal(t, ExitNotFit, res.code)
	assert.Contains(t, res.stderr, "--min-score")
	res = runCLI(t, runOpts{}, "eval", "--probes", probes, "--in-process", "--min-category", "70", session)
	assert.Equal(t, ExitNotFit, res.code)
	assert.Contains(t, res.stderr, "next_step")
}

func TestEvalProbesErrors(t *testing.T) {
	session := sampleSession(t)
	bad := writeFile(t, "bad.json", `{"session": "bugfix.jsonl", "points": [{"id": "p", "at": 6, "probes": [{"id": "a", "category": "guess", "question": "q", "any_of": ["x"]}]}]}`)
	res := runCLI(t, runOpts{}, "eval", "--probes", bad, "--in-process", session)
	assert.Equal(t, ExitInput, res.code)
	assert.Contains(t, res.stderr, bad)

	far := writeFile(t, "far.json", `{"session": "bugfix.jsonl", "points": [{"id": "p", "at": 500, "probes": [{"id": "a", "category": "fact", "question": "q", "any_of": ["x"]}]}]}`)
	res = runCLI(t, runOpts{}, "eval", "--probes", far, "--in-process", session)
	assert.Equal(t, ExitInput, res.code)
	assert.Contains(t, res.stderr, "at 500")

	probes := writeFile(t, "bugfix.json", probeFile)
	res = runCLI(t, runOpts{}, "eval", "--min-score", "80", session)
	assert.Equal(t, ExitUsage, res.code, "--min-score without --probes")
	res = runCLI(t, runOpts{}, "eval", "--probes", probes, "--min-score", "180", session)
	assert.Equal(t, ExitUsage, res.code)
	res = runCLI(t, runOpts{}, "eval", "--probes", probes, "--strategy", "structured", "--strategy", "narrative", session)
	assert.Equal(t, ExitUsage, res.code)
}

// On a session holding the agent's own condensation (Roo Code), eval
// --probes shows the agent's text scored beside ours, in the table and in
// --json, and says which point could not be compacted.
func TestEvalProbesAgentComparison(t *testing.T) {
	corpus := corpusDir(t)
	session := filepath.Join(corpus, "..", "corpus-new", "roo-code-task-restore.api_conversation_history.json")
	if _, err := os.Stat(session); err != nil {
		t.Skipf("no %s: %v", session, err)
	}
	probes := filepath.Join("..", "eval", "testdata", "probes", "roo-code-task-restore.json")

	res := runCLI(t, runOpts{}, "eval", "--probes", probes, "--in-process", "--json")
	require.Equal(t, ExitOK, res.code, res.stderr)
	var rep struct {
		Points []struct {
			At           int  `json:"at"`
			NotCompacted bool `json:"not_compacted"`
		} `json:"points"`
		AgentComparisons []struct {
			Agent           string `json:"agent"`
			At              int    `json:"at"`
			AgentText       string `json:"agent_text"`
			Probes          int    `json:"probes"`
			AgentAnswered   int    `json:"agent_answered"`
			SummaryAnswered *int   `json:"summary_answered"`
			OursAnswered    int    `json:"ours_answered"`
		} `json:"agent_comparisons"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep))
	require.Len(t, rep.AgentComparisons, 1, "one condensation in the file")
	c := rep.AgentComparisons[0]
	assert.Equal(t, "cline", c.Agent)
	assert.Equal(t, 1, c.At)
	assert.Equal(t, "summary and replacement history", c.AgentText)
	assert.Positive(t, c.Probes)
	require.NotNil(t, c.SummaryAnswered)
	assert.LessOrEqual(t, *c.SummaryAnswered, c.AgentAnswered, "the summary alone answers no more than with the task it keeps")
	require.NotEmpty(t, rep.Points)
	assert.True(t, rep.Points[0].NotCompacted, "a point after one message is scored on it")

	res = runCLI(t, runOpts{}, "eval", "--probes", probes, "--in-process")
	require.Equal(t, ExitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "The agents' own compactions")
	assert.Contains(t, res.stdout, "(not compacted)")
	assert.Contains(t, res.stdout, "not compacted: one message before the point")
}
