package eval

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/cost"
)

// svgLine is a polyline of a cost chart as its XML reads.
type svgLine struct {
	policy string
	usd    float64
	points [][2]float64
}

// readCostChart decodes a chart, failing on XML that is not well-formed,
// and returns its lines and its compaction marks by policy.
func readCostChart(t *testing.T, path string) ([]svgLine, map[string]int) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var lines []svgLine
	marks := map[string]int{}
	dec := xml.NewDecoder(strings.NewReader(string(data)))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the chart is well-formed XML")
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := map[string]string{}
		for _, a := range el.Attr {
			attr[a.Name.Local] = a.Value
		}
		switch {
		case el.Name.Local == "polyline":
			l := svgLine{policy: attr["data-policy"]}
			l.usd, err = strconv.ParseFloat(attr["data-usd"], 64)
			require.NoError(t, err)
			for _, pt := range strings.Fields(attr["points"]) {
				xs, ys, ok := strings.Cut(pt, ",")
				require.True(t, ok, pt)
				x, err := strconv.ParseFloat(xs, 64)
				require.NoError(t, err)
				y, err := strconv.ParseFloat(ys, 64)
				require.NoError(t, err)
				l.points = append(l.points, [2]float64{x, y})
			}
			lines = append(lines, l)
		case el.Name.Local == "circle" && attr["data-policy"] != "":
			marks[attr["data-policy"]]++
		}
	}
	return lines, marks
}

func TestCostChartsDrawTheReportsCosts(t *testing.T) {
	dir := t.TempDir()
	// The threshold compacts at 110k; the agent's own prompt drops from
	// 114k to 30k, a compaction it made.
	path := usageSession(t, dir, 60_000, 80_000, 100_000, 110_000, 114_000, 30_000, 40_000)
	rep, err := RunCost(CostOptions{Sessions: []string{path}})
	require.NoError(t, err)
	s := rep.Sessions[0]

	files, err := rep.WriteCharts(filepath.Join(dir, "charts"))
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "charts", "session.cost.svg")}, files)
	lines, marks := readCostChart(t, files[0])

	require.Len(t, lines, len(Policies)+1, "a line per policy and the recorded bill")
	compactions := 0
	for i, pc := range s.Policies {
		l := lines[i]
		assert.Equal(t, pc.Policy, l.policy)
		require.Len(t, l.points, 2*s.Calls-1, pc.Policy, "a step per call")
		// The line ends at the report's cost, from the same replay.
		assert.InDelta(t, pc.USD, newCostLine(pc.Policy, pc.Steps).end(), 1e-12, pc.Policy)
		assert.InDelta(t, pc.USD, l.usd, 1e-6, pc.Policy)
		assert.Equal(t, pc.Compactions, marks[pc.Policy], pc.Policy)
		compactions += pc.Compactions
		// Time runs left to right to the plot's right edge, a minute a
		// call; cost only grows (up the chart), when a call is sent.
		last := l.points[len(l.points)-1]
		assert.InDelta(t, float64(chartWidth-marginRight), last[0], 0.05, pc.Policy)
		for j := 1; j < len(l.points); j++ {
			if j%2 == 1 {
				assert.Greater(t, l.points[j][0], l.points[j-1][0], pc.Policy)
				assert.Equal(t, l.points[j][1], l.points[j-1][1], pc.Policy)
			} else {
				assert.Equal(t, l.points[j][0], l.points[j-1][0], pc.Policy)
				assert.Less(t, l.points[j][1], l.points[j-1][1], pc.Policy)
			}
		}
	}
	assert.Positive(t, compactions)
	billed := lines[len(lines)-1]
	assert.Equal(t, "billed", billed.policy)
	assert.InDelta(t, s.BilledUSD, billed.usd, 1e-6)
	assert.Zero(t, marks["billed"])

	// A directory that cannot be made is a clear error.
	blocker := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	_, err = rep.WriteCharts(filepath.Join(blocker, "charts"))
	assert.ErrorContains(t, err, "eval: charts:")
}

func TestMergeStepsOrdersConversationsByTime(t *testing.T) {
	t0 := time.Date(2026, 2, 8, 11, 0, 0, 0, time.UTC)
	main := []cost.Step{{Time: t0, USD: 1}, {Time: t0.Add(2 * time.Minute), USD: 2}, {USD: 3}}
	sub := []cost.Step{{Time: t0.Add(time.Minute), USD: 10}, {Time: t0.Add(3 * time.Minute), USD: 20}}
	got := mergeSteps([][]cost.Step{main, sub})
	var usd []float64
	for _, s := range got {
		usd = append(usd, s.USD)
	}
	// The untimed call follows the one before it in its conversation.
	assert.Equal(t, []float64{1, 10, 2, 3, 20}, usd)
	assert.Equal(t, t0.Add(2*time.Minute), got[3].Time)

	// No times at all: one conversation after the other.
	got = mergeSteps([][]cost.Step{{{USD: 1}, {USD: 2}}, {{USD: 3}}})
	assert.Equal(t, 3.0, got[2].USD)
}
