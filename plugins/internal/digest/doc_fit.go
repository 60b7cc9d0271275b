package digest

import (
	"context"
	"fmt"
	"strings"
)

// Never is the priority of an item Fit must not drop.
const Never = 1 << 30

// Item is one line (or a few) of a summary section.
type Item struct {
	Text string
	// Keep is the item's priority: Fit drops the lowest first, and the
	// oldest first among equals. Never is never dropped.
	Keep int
	// Header, when set, is written once above a run of items that share it.
	Header string
}

// Part is a section of a summary built from items.
type Part struct {
	Title string
	Items []Item
	// Empty is written when the part has no items.
	Empty string
	// Omitted is a format with one %d, written first when Fit dropped
	// items of this part.
	Omitted string
	dropped int
}

// Doc is a summary assembled from parts, which Fit can shrink item by item.
type Doc struct {
	// Preamble is written before the first part; Trailer after the last.
	Preamble, Trailer string
	Parts             []Part
	// Prose writes each part as a paragraph led by its title in bold, its
	// items run together, instead of a heading and lines.
	Prose bool
}

// Render writes the document as markdown with a "## " heading per part.
func (d *Doc) Render() string {
	var b strings.Builder
	if d.Preamble != "" {
		b.WriteString(d.Preamble)
		b.WriteString("\n\n")
	}
	if d.Prose {
		return d.renderProse(&b)
	}
	for i, p := range d.Parts {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("## " + p.Title + "\n")
		if p.dropped > 0 && p.Omitted != "" {
			fmt.Fprintf(&b, p.Omitted+"\n", p.dropped)
		}
		if len(p.Items) == 0 && p.dropped == 0 {
			b.WriteString(p.Empty + "\n")
		}
		header := ""
		for _, it := range p.Items {
			if it.Header != header {
				header = it.Header
				if header != "" {
					b.WriteString(header + "\n")
				}
			}
			b.WriteString(it.Text + "\n")
		}
	}
	if d.Trailer != "" {
		b.WriteString("\n" + d.Trailer + "\n")
	}
	return b.String()
}

// Fit drops items until count(d.Render()) <= maxTokens or only items kept
// at Never remain. maxTokens <= 0 means no limit.
func (d *Doc) Fit(maxTokens int, count func(string) int) {
	if maxTokens <= 0 {
		return
	}
	for count(d.Render()) > maxTokens {
		pi, ii := -1, -1
		low := Never
		for p := range d.Parts {
			for i, it := range d.Parts[p].Items {
				if it.Keep < low {
					low, pi, ii = it.Keep, p, i
				}
			}
		}
		if pi < 0 {
			return
		}
		p := &d.Parts[pi]
		p.Items = append(p.Items[:ii], p.Items[ii+1:]...)
		p.dropped++
	}
}

// FitDoc fits d to target tokens and renders it. It fits with the byte
// estimate, then, when count is given, measures the result once with it
// (the host's tokenizer) and fits again to a proportionally smaller
// estimate if the host counts more. A count error leaves the estimate.
func FitDoc(ctx context.Context, d *Doc, target int, count func(context.Context, string) (int, error)) string {
	d.Fit(target, EstimateTokens)
	s := d.Render()
	if target <= 0 || count == nil {
		return s
	}
	n, err := count(ctx, s)
	if err != nil || n <= target {
		return s
	}
	d.Fit(target*EstimateTokens(s)/n, EstimateTokens)
	return d.Render()
}

func (d *Doc) renderProse(b *strings.Builder) string {
	for _, p := range d.Parts {
		var parts []string
		if p.dropped > 0 && p.Omitted != "" {
			parts = append(parts, fmt.Sprintf(p.Omitted, p.dropped))
		}
		for _, it := range p.Items {
			parts = append(parts, it.Text)
		}
		if len(parts) == 0 {
			if p.Empty == "" {
				continue
			}
			parts = append(parts, p.Empty)
		}
		b.WriteString("**" + p.Title + ".** " + strings.Join(parts, " ") + "\n\n")
	}
	if d.Trailer != "" {
		b.WriteString(d.Trailer + "\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}
