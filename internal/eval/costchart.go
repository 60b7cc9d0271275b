package eval

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/compact-host/compact-host/host/cost"
)

// billedColor draws the recorded bill, the reference of a cost chart.
const billedColor = "#888"

// WriteCharts writes one SVG chart per session into dir (created if
// needed): the cumulative cost of each policy over the time since the
// session's first call, its compactions marked, with what the recorded
// usage was billed for reference. It returns the files written.
func (r *CostReport) WriteCharts(dir string) ([]string, error) {
	return writeCharts(dir, len(r.Sessions), func(i int) string { return short(r.Sessions[i].Session) + ".cost.svg" },
		func(w io.Writer, i int) error { return r.Sessions[i].writeChart(w) })
}

// costLine is one line of a cost chart: the cost after each call, from
// the same steps whose sum the report prints.
type costLine struct {
	name   string
	steps  []cost.Step
	cum    []float64
	marked int
}

func newCostLine(name string, steps []cost.Step) costLine {
	l := costLine{name: name, steps: steps, cum: make([]float64, len(steps))}
	sum := 0.0
	for i, s := range steps {
		sum += s.USD
		l.cum[i] = sum
		if s.Compacted {
			l.marked++
		}
	}
	return l
}

// end is the line's last value, the whole replay's cost.
func (l costLine) end() float64 {
	if len(l.cum) == 0 {
		return 0
	}
	return l.cum[len(l.cum)-1]
}

// lines are the chart's lines: each policy's, then the recorded bill.
func (s *CostSession) lines() []costLine {
	var out []costLine
	for _, pc := range s.Policies {
		out = append(out, newCostLine(pc.Policy, pc.Steps))
	}
	if len(s.billed) > 0 {
		out = append(out, newCostLine("billed", s.billed))
	}
	return out
}

// writeChart draws the cumulative cost of each policy of the session.
func (s *CostSession) writeChart(w io.Writer) error {
	lines := s.lines()
	// The x axis is the time since the first call; a file without times
	// (each call taken to follow at once, as the replay takes it) is
	// drawn by call.
	var first, last time.Time
	calls := 0
	for _, l := range lines {
		calls = max(calls, len(l.steps))
		for _, st := range l.steps {
			if st.Time.IsZero() {
				continue
			}
			if first.IsZero() || st.Time.Before(first) {
				first = st.Time
			}
			if st.Time.After(last) {
				last = st.Time
			}
		}
	}
	timed := !first.IsZero()
	unit, unitName := time.Minute, "minutes"
	span := float64(max(calls-1, 1))
	if timed {
		if last.Sub(first) > 3*time.Hour {
			unit, unitName = time.Hour, "hours"
		}
		span = max(float64(last.Sub(first))/float64(unit), 1e-9)
	}
	top := 0.01
	for _, l := range lines {
		top = max(top, l.end())
	}
	yStep := niceStep(top / 6)
	yMax := math.Ceil(top/yStep) * yStep

	window := "the model's window"
	if s.window > 0 {
		window = kilo(s.window) + " window"
	}
	c := newCanvas(w, fmt.Sprintf("%s (%s, %s, %d calls, %s cache)", s.Session, s.Model, window, s.Calls, s.CacheTTL),
		"cumulative billed cost (USD) of the model calls and summary calls under each policy; ○ marks a compaction")
	x := func(i int, st cost.Step) float64 {
		v := float64(i)
		if timed {
			v = 0
			if !st.Time.IsZero() {
				v = float64(st.Time.Sub(first)) / float64(unit)
			}
		}
		return marginLeft + c.plotW*v/span
	}
	var xs []float64
	var xLabels []string
	xStep := niceStep(span / 8)
	if !timed {
		xStep = max(xStep, 1)
	}
	for v := 0.0; v <= span*(1+1e-9); v += xStep {
		xs = append(xs, marginLeft+c.plotW*v/span)
		xLabels = append(xLabels, fmt.Sprintf("%g", v))
	}
	xTitle := "model call (the file records no times)"
	if timed {
		xTitle = unitName + " since the first call"
	}
	c.axes(yMax, yStep, usd, xs, xLabels, xTitle)

	for i, l := range lines {
		color, width := strategyColors[i%len(strategyColors)], 1.8
		label := fmt.Sprintf("%s %s, %d ○", l.name, usd(l.end()), l.marked)
		if l.name == "billed" {
			color, width, label = billedColor, 1.2, "recorded bill "+usd(l.end())
		}
		c.p(`<polyline fill="none" stroke="%s" stroke-width="%.1f" data-policy="%s" data-usd="%.6f" points="`, color, width, esc(l.name), l.end())
		// A step line: the cost is paid when a call is sent, not over the
		// pause before it.
		for j, st := range l.steps {
			if j > 0 {
				c.p("%.1f,%.1f ", x(j, st), c.y(l.cum[j-1], yMax))
			}
			c.p("%.1f,%.1f ", x(j, st), c.y(l.cum[j], yMax))
		}
		c.p(`"/>` + "\n")
		for j, st := range l.steps {
			if st.Compacted {
				c.p(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="white" stroke="%s" stroke-width="1.5" data-policy="%s"/>`+"\n",
					x(j, st), c.y(l.cum[j], yMax), color, esc(l.name))
			}
		}
		c.legendItem(color, "", label, false)
	}
	return c.close()
}

// usd writes a cost in dollars, to the cent from a dollar up.
func usd(v float64) string {
	if v >= 1 || v == 0 {
		return fmt.Sprintf("$%.2f", v)
	}
	return fmt.Sprintf("$%.3g", v)
}
