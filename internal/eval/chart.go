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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("eval: charts: %w", err)
	}
	var files []string
	for i := range r.Sessions {
		s := &r.Sessions[i]
		if s.Err != "" {
			continue
		}
		path := filepath.Join(dir, short(s.Name)+".svg")
		f, err := os.Create(path)
		if err != nil {
			return files, fmt.Errorf("eval: charts: %w", err)
		}
		err = r.writeChart(f, s)
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
	plotW := float64(chartWidth - marginLeft - marginRight)
	plotH := float64(chartHeight - marginTop - marginBottom)
	x := func(call int) float64 { return marginLeft + plotW*float64(call)/float64(calls) }
	y := func(v int) float64 { return marginTop + plotH*(1-float64(v)/yMax) }

	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginLeft, esc(fmt.Sprintf("%s (%s, %d messages, %d model calls)", s.Name, s.Format, s.Messages, s.Calls)))
	p(`<text x="%d" y="38" fill="#555">context tokens (chars/4 of the messages) before each model call; ○ marks a compaction</text>`+"\n", marginLeft)

	// Axes and grid.
	for v := 0.0; v <= yMax+yStep/2; v += yStep {
		yy := y(int(v))
		p(`<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", marginLeft, yy, marginLeft+plotW, yy)
		p(`<text x="%d" y="%.1f" text-anchor="end" fill="#333">%s</text>`+"\n", marginLeft-6, yy+4, esc(kilo(int(v))))
	}
	xStep := max(niceStep(float64(calls)/8), 1)
	for c := 0.0; c <= float64(calls); c += xStep {
		xx := x(int(c))
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`+"\n", xx, marginTop+plotH, xx, marginTop+plotH+4)
		p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#333">%d</text>`+"\n", xx, marginTop+plotH+18, int(c))
	}
	p(`<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", marginLeft, marginTop, plotW, plotH)
	p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#333">model call</text>`+"\n", marginLeft+plotW/2, chartHeight-12)

	// Windows, for reference.
	windows := slices.Clone(r.Windows)
	slices.Sort(windows)
	for _, win := range windows {
		if float64(win) > yMax {
			continue
		}
		p(`<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#bbb" stroke-dasharray="3 3"/>`+"\n", marginLeft, y(win), marginLeft+plotW, y(win))
		p(`<text x="%.1f" y="%.1f" text-anchor="end" fill="#888" font-size="10">%s window</text>`+"\n", marginLeft+plotW-4, y(win)-3, esc(kilo(win)))
	}

	legend := 0
	legendItem := func(stroke, dash, label string, dots bool) {
		ly := float64(marginTop + 8 + legend*18)
		lx := float64(chartWidth - marginRight + 16)
		if dots {
			p(`<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", lx+14, ly, stroke)
		} else {
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+28, ly, stroke, dashAttr(dash))
		}
		p(`<text x="%.1f" y="%.1f" fill="#222">%s</text>`+"\n", lx+34, ly+4, esc(label))
		legend++
	}

	// Uncompacted context and recorded usage.
	if len(s.Baseline) > 0 {
		p(`<polyline fill="none" stroke="#aaa" stroke-width="1.5" points="`)
		for c, v := range s.Baseline {
			p("%.1f,%.1f ", x(c), y(v))
		}
		p(`"/>` + "\n")
		legendItem("#aaa", "", "uncompacted", false)
	}
	if slices.ContainsFunc(s.Recorded, func(v int) bool { return v > 0 }) {
		for c, v := range s.Recorded {
			if v > 0 {
				p(`<circle cx="%.1f" cy="%.1f" r="1.8" fill="#666"/>`+"\n", x(c), y(v))
			}
		}
		legendItem("#666", "", "recorded usage (whole prompt)", true)
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
		legendItem(color, dash, fmt.Sprintf("%s window, %s (%d)", kilo(run.Window), run.Strategy, len(run.Compactions)), false)
	}
	p("</svg>\n")
	return bw.Flush()
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
