package eval

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	chartWidth   = 1000
	chartHeight  = 560
	marginLeft   = 70
	marginRight  = 250
	marginTop    = 48
	marginBottom = 52
)

var (
	strategyColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"}
	windowDashes   = []string{"", "9 4", "2 3", "12 3 3 3", "6 2"}
)

// WriteCharts writes one SVG chart per session into dir (created if
// needed): context tokens at each model call, one line per window and
// strategy, compactions marked, with the uncompacted context and the usage
// the file records for reference. It returns the files written.
func (r *Report) WriteCharts(dir string) ([]string, error) {
	var sessions []*SessionInfo
	for i := range r.Sessions {
		if r.Sessions[i].Err == "" {
			sessions = append(sessions, &r.Sessions[i])
		}
	}
	return writeCharts(dir, len(sessions), func(i int) string { return short(sessions[i].Name) + ".svg" },
		func(w io.Writer, i int) error { return r.writeChart(w, sessions[i]) })
}

// writeCharts writes n charts into dir (created if needed), the i-th
// named name(i) and drawn by draw; it returns the files written.
func writeCharts(dir string, n int, name func(int) string, draw func(io.Writer, int) error) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("eval: charts: %w", err)
	}
	var files []string
	for i := range n {
		path := filepath.Join(dir, name(i))
		f, err := os.Create(path)
		if err != nil {
			return files, fmt.Errorf("eval: charts: %w", err)
		}
		err = draw(f, i)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, fmt.Errorf("eval: chart %s: %w", path, err)
		}
		files = append(files, path)
	}
	return files, nil
}

// canvas is one SVG chart being drawn: a plot area with a grid, axes and
// a legend to its right.
type canvas struct {
	bw           *bufio.Writer
	plotW, plotH float64
	legend       int
}

// newCanvas starts a chart on w with its title and the line under it.
func newCanvas(w io.Writer, title, subtitle string) *canvas {
	c := &canvas{bw: bufio.NewWriter(w), plotW: chartWidth - marginLeft - marginRight, plotH: chartHeight - marginTop - marginBottom}
	c.p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight)
	c.p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	c.p(`<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginLeft, esc(title))
	c.p(`<text x="%d" y="38" fill="#555">%s</text>`+"\n", marginLeft, esc(subtitle))
	return c
}

func (c *canvas) p(format string, args ...any) { fmt.Fprintf(c.bw, format, args...) }

// y is the height of v on an axis from 0 to yMax.
func (c *canvas) y(v, yMax float64) float64 { return marginTop + c.plotH*(1-v/yMax) }

// axes draws the horizontal grid from 0 to yMax every yStep, labelled by
// yLabel, the x ticks at the positions and with the labels given, the
// frame, and xTitle under it.
func (c *canvas) axes(yMax, yStep float64, yLabel func(float64) string, xs []float64, xLabels []string, xTitle string) {
	for v := 0.0; v <= yMax+yStep/2; v += yStep {
		yy := c.y(v, yMax)
		c.p(`<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", marginLeft, yy, marginLeft+c.plotW, yy)
		c.p(`<text x="%d" y="%.1f" text-anchor="end" fill="#333">%s</text>`+"\n", marginLeft-6, yy+4, esc(yLabel(v)))
	}
	for i, xx := range xs {
		c.p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`+"\n", xx, marginTop+c.plotH, xx, marginTop+c.plotH+4)
		c.p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#333">%s</text>`+"\n", xx, marginTop+c.plotH+18, esc(xLabels[i]))
	}
	c.p(`<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", marginLeft, marginTop, c.plotW, c.plotH)
	c.p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#333">%s</text>`+"\n", marginLeft+c.plotW/2, chartHeight-12, esc(xTitle))
}

// legendItem adds a line (or, with dots, a dot) of stroke and dash and
// its label to the legend.
func (c *canvas) legendItem(stroke, dash, label string, dots bool) {
	ly := float64(marginTop + 8 + c.legend*18)
	lx := float64(chartWidth - marginRight + 16)
	if dots {
		c.p(`<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", lx+14, ly, stroke)
	} else {
		c.p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+28, ly, stroke, dashAttr(dash))
	}
	c.p(`<text x="%.1f" y="%.1f" fill="#222">%s</text>`+"\n", lx+34, ly+4, esc(label))
	c.legend++
}

// close ends the chart and flushes it.
func (c *canvas) close() error {
	c.p("</svg>\n")
	return c.bw.Flush()
}

// writeChart draws the runs of one session.
func (r *Report) writeChart(w io.Writer, s *SessionInfo) error {
	var runs []*RunResult
	for i := range r.Runs {
		if r.Runs[i].Session == s.Name && r.Runs[i].Err == "" {
			runs = append(runs, &r.Runs[i])
		}
	}
	calls := max(s.Calls, 1)
	top := 1000
	for _, v := range s.Baseline {
		top = max(top, v)
	}
	for _, v := range s.Recorded {
		top = max(top, v)
	}
	for _, run := range runs {
		top = max(top, run.Window)
		for _, p := range run.Series {
			top = max(top, p.Before)
		}
	}
	yStep := niceStep(float64(top) / 6)
	yMax := math.Ceil(float64(top)/yStep) * yStep
	c := newCanvas(w, fmt.Sprintf("%s (%s, %d messages, %d model calls)", s.Name, s.Format, s.Messages, s.Calls),
		"context tokens (chars/4 of the messages) before each model call; ○ marks a compaction")
	p := c.p
	x := func(call int) float64 { return marginLeft + c.plotW*float64(call)/float64(calls) }
	y := func(v int) float64 { return c.y(float64(v), yMax) }

	var xs []float64
	var xLabels []string
	xStep := max(niceStep(float64(calls)/8), 1)
	for cl := 0.0; cl <= float64(calls); cl += xStep {
		xs, xLabels = append(xs, x(int(cl))), append(xLabels, fmt.Sprint(int(cl)))
	}
	c.axes(yMax, yStep, func(v float64) string { return kilo(int(v)) }, xs, xLabels, "model call")

	// Windows, for reference.
	windows := slices.Clone(r.Windows)
	slices.Sort(windows)
	for _, win := range windows {
		if float64(win) > yMax {
			continue
		}
		p(`<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#bbb" stroke-dasharray="3 3"/>`+"\n", marginLeft, y(win), marginLeft+c.plotW, y(win))
		p(`<text x="%.1f" y="%.1f" text-anchor="end" fill="#888" font-size="10">%s window</text>`+"\n", marginLeft+c.plotW-4, y(win)-3, esc(kilo(win)))
	}

	// Uncompacted context and recorded usage.
	if len(s.Baseline) > 0 {
		p(`<polyline fill="none" stroke="#aaa" stroke-width="1.5" points="`)
		for cl, v := range s.Baseline {
			p("%.1f,%.1f ", x(cl), y(v))
		}
		p(`"/>` + "\n")
		c.legendItem("#aaa", "", "uncompacted", false)
	}
	if slices.ContainsFunc(s.Recorded, func(v int) bool { return v > 0 }) {
		for cl, v := range s.Recorded {
			if v > 0 {
				p(`<circle cx="%.1f" cy="%.1f" r="1.8" fill="#666"/>`+"\n", x(cl), y(v))
			}
		}
		c.legendItem("#666", "", "recorded usage (whole prompt)", true)
	}

	// One line per run.
	for _, run := range runs {
		color := strategyColors[slices.Index(r.strategyNames(), run.Strategy)%len(strategyColors)]
		dash := windowDashes[max(slices.Index(r.Windows, run.Window), 0)%len(windowDashes)]
		var d strings.Builder
		for i, pt := range run.Series {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, x(pt.Call), y(pt.Before))
			if pt.After != pt.Before {
				fmt.Fprintf(&d, "L%.1f %.1f ", x(pt.Call), y(pt.After))
			}
		}
		p(`<path fill="none" stroke="%s" stroke-width="1.6"%s d="%s"/>`+"\n", color, dashAttr(dash), strings.TrimSpace(d.String()))
		for _, pt := range run.Series {
			if pt.Compacted {
				p(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="white" stroke="%s" stroke-width="1.5"/>`+"\n", x(pt.Call), y(pt.Before), color)
			}
		}
		c.legendItem(color, dash, fmt.Sprintf("%s window, %s (%d)", kilo(run.Window), run.Strategy, len(run.Compactions)), false)
	}
	return c.close()
}

func (r *Report) strategyNames() []string {
	names := make([]string, len(r.Strategies))
	for i, s := range r.Strategies {
		names[i] = s.Name
	}
	return names
}

func dashAttr(dash string) string {
	if dash == "" {
		return ""
	}
	return fmt.Sprintf(` stroke-dasharray="%s"`, dash)
}

// niceStep rounds a raw axis step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*pow {
			return m * pow
		}
	}
	return 10 * pow
}

func esc(s string) string { return html.EscapeString(s) }
