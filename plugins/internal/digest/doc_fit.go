package digest

import (
	"context"
	"fmt"
	"io"
	"sort"
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
	// Short, when set, is a shorter form of the item (a file's path
	// without the detail of its change, the head of a long request):
	// Fit writes it in place of Text once items of priority Trim are
	// given up, before it drops the item itself at Keep.
	Short string
	Trim  int
}

// Item states while fitting: written whole, written in its short form,
// or left out.
const (
	whole uint8 = iota
	short
	left
)

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
	b.Grow(d.size(nil))
	d.write(&b, nil)
	if d.Prose {
		return strings.TrimRight(b.String(), "\n") + "\n"
	}
	return b.String()
}

// size is the length of Render's result with the items in the states
// given (left out ones counted by each part's omission note), computed
// without building the text.
func (d *Doc) size(dropped [][]uint8) int {
	var c byteCounter
	d.write(&c, dropped)
	if d.Prose {
		return c.n - c.newlines + 1
	}
	return c.n
}

// byteCounter counts what is written to it and the newlines it ends with.
type byteCounter struct{ n, newlines int }

func (c *byteCounter) WriteString(s string) (int, error) {
	c.n += len(s)
	t := strings.TrimRight(s, "\n")
	if t == "" {
		c.newlines += len(s)
	} else {
		c.newlines = len(s) - len(t)
	}
	return len(s), nil
}

// write writes the document to w with the items in the states given
// (nil: all whole).
func (d *Doc) write(w io.StringWriter, dropped [][]uint8) {
	if d.Preamble != "" {
		w.WriteString(d.Preamble)
		w.WriteString("\n\n")
	}
	for i := range d.Parts {
		p := &d.Parts[i]
		var mask []uint8
		if dropped != nil {
			mask = dropped[i]
		}
		n := p.dropped
		for _, x := range mask {
			if x == left {
				n++
			}
		}
		kept := len(p.Items) - (n - p.dropped)
		omitted := ""
		if n > 0 && p.Omitted != "" {
			omitted = fmt.Sprintf(p.Omitted, n)
		}
		if d.Prose {
			if kept == 0 && omitted == "" {
				if p.Empty == "" {
					continue
				}
				w.WriteString("**" + p.Title + ".** " + p.Empty + "\n\n")
				continue
			}
			w.WriteString("**" + p.Title + ".** ")
			sep := ""
			if omitted != "" {
				w.WriteString(omitted)
				sep = " "
			}
			for j, it := range p.Items {
				if mask != nil && mask[j] == left {
					continue
				}
				w.WriteString(sep)
				w.WriteString(it.text(mask, j))
				sep = " "
			}
			w.WriteString("\n\n")
			continue
		}
		if i > 0 {
			w.WriteString("\n")
		}
		w.WriteString("## " + p.Title + "\n")
		if omitted != "" {
			w.WriteString(omitted + "\n")
		}
		if kept == 0 && n == 0 {
			w.WriteString(p.Empty + "\n")
		}
		header := ""
		for j, it := range p.Items {
			if mask != nil && mask[j] == left {
				continue
			}
			if it.Header != header {
				header = it.Header
				if header != "" {
					w.WriteString(header + "\n")
				}
			}
			w.WriteString(it.text(mask, j))
			w.WriteString("\n")
		}
	}
	if d.Trailer != "" {
		if d.Prose {
			w.WriteString(d.Trailer + "\n")
		} else {
			w.WriteString("\n" + d.Trailer + "\n")
		}
	}
}

// text is what the item writes in state mask[j] (mask nil: whole).
func (it *Item) text(mask []uint8, j int) string {
	if mask != nil && mask[j] == short && it.Short != "" {
		return it.Short
	}
	return it.Text
}

// Fit shortens and drops items until the rendered document is at most
// maxTokens by EstimateTokens or only items kept at Never, in their short
// form where they have one, remain. maxTokens <= 0 means no limit. It
// sizes the document from its items, without rendering it: the steps (an
// item's shortening at its Trim, its dropping at its Keep) are ranked
// once (lowest priority first, oldest first among equals) and the number
// of steps to take is found by bisection over that order, each step a
// linear count of bytes.
func (d *Doc) Fit(maxTokens int) {
	if maxTokens <= 0 || d.size(nil) <= maxTokens*4 {
		return
	}
	var order []step
	for p := range d.Parts {
		for i, it := range d.Parts[p].Items {
			if it.Short != "" {
				order = append(order, step{p, i, min(it.Trim, it.Keep), short})
			}
			if it.Keep < Never {
				order = append(order, step{p, i, it.Keep, left})
			}
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].keep < order[j].keep })
	state := make([][]uint8, len(d.Parts))
	for p := range d.Parts {
		state[p] = make([]uint8, len(d.Parts[p].Items))
	}
	mark := func(k int) {
		for p := range state {
			clear(state[p])
		}
		for _, r := range order[:k] {
			state[r.part][r.item] = max(state[r.part][r.item], r.to)
		}
	}
	// The byte estimate is monotone in the steps taken, apart from each
	// part's omission note, which the search tolerates: it finds the
	// fewest steps that fit as the estimate counts.
	limit := maxTokens * 4
	lo, hi := 0, len(order)
	for lo < hi {
		mid := (lo + hi) / 2
		mark(mid)
		if d.size(state) <= limit {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	mark(lo)
	refill(d, state, order[:lo], limit)
	for p := range d.Parts {
		part := &d.Parts[p]
		kept := part.Items[:0]
		for i, it := range part.Items {
			switch state[p][i] {
			case left:
				part.dropped++
				continue
			case short:
				it.Text, it.Short = it.Short, ""
			}
			kept = append(kept, it)
		}
		part.Items = kept
	}
}

// step is one move of Fit: item item of part part shortened or left out
// (to) once items of priority keep give way.
type step struct {
	part, item, keep int
	to               uint8
}

// refill takes back the steps taken that are no longer needed, the last
// taken first: a long item shortened late in the order (a request cut to
// its head and tail) can free more room than the drops before it, and
// what fits again beside it is kept. Each take-back is judged by the
// bytes it adds, counted high (its line and its header), and the result
// is measured once at the end; over the limit, the steps stand.
func refill(d *Doc, state [][]uint8, taken []step, limit int) {
	size := d.size(state)
	if size >= limit {
		return
	}
	var undone []step
	for k := len(taken) - 1; k >= 0; k-- {
		r := taken[k]
		if state[r.part][r.item] != r.to {
			continue // a later step of the item still stands
		}
		it := &d.Parts[r.part].Items[r.item]
		back := whole
		if r.to == left {
			for _, q := range taken[:k] {
				if q.part == r.part && q.item == r.item && q.to == short {
					back = short
				}
			}
		}
		var add int
		if r.to == left {
			text := it.Text
			if back == short && it.Short != "" {
				text = it.Short
			}
			add = len(text) + 1 + len(it.Header) + 1
		} else {
			add = len(it.Text) - len(it.Short)
		}
		if size+add > limit {
			continue
		}
		size += add
		state[r.part][r.item] = back
		undone = append(undone, r)
	}
	if len(undone) > 0 && d.size(state) > limit {
		for _, r := range undone {
			state[r.part][r.item] = max(state[r.part][r.item], r.to)
		}
	}
}

// Room is the size to fit d to for a target of target tokens: the target,
// unless the items never dropped (the request in progress, the modified
// files), take more than three fifths of it on their own; then those items
// and two fifths of the target, so the summary keeps its most important
// other items beside them rather than none, and at most 1.8 times the
// target, under the host's limit of twice it.
func (d *Doc) Room(target int) int {
	if target <= 0 {
		return target
	}
	state := make([][]uint8, len(d.Parts))
	for p := range d.Parts {
		state[p] = make([]uint8, len(d.Parts[p].Items))
		for i, it := range d.Parts[p].Items {
			if it.Keep < Never {
				state[p][i] = left
			}
		}
	}
	fixed := (d.size(state) + 3) / 4
	if fixed <= target*3/5 {
		return target
	}
	return min(fixed+target*2/5, target*9/5)
}

// FitDoc fits d to target tokens and renders it. It fits with the byte
// estimate, then, when count is given, measures the result once with it
// (the host's tokenizer) and fits again to a proportionally smaller
// estimate if the host counts more. A count error leaves the estimate.
func FitDoc(ctx context.Context, d *Doc, target int, count func(context.Context, string) (int, error)) string {
	d.Fit(target)
	s := d.Render()
	if target <= 0 || count == nil {
		return s
	}
	n, err := count(ctx, s)
	if err != nil || n <= target {
		return s
	}
	d.Fit(target * EstimateTokens(s) / n)
	return d.Render()
}

// Dedupe drops every item whose text, on one line and without its list
// marker, an earlier item already says, so that no line of a summary is
// written twice. Short items (a bare marker, a number) are left alone. A
// long item (a sentence, not a name) also goes when an earlier item that
// Fit gives up no sooner quotes it whole: "Last said: “X”" and a later
// "- X" say the same thing, and at a small window the second copy costs
// what another finding would have had.
func (d *Doc) Dedupe() {
	seen := map[string]bool{}
	// quoted holds what the items kept so far quote (“…”), with the
	// highest priority of an item quoting it.
	quoted := map[string]int{}
	for p := range d.Parts {
		part := &d.Parts[p]
		kept := part.Items[:0]
		for _, it := range part.Items {
			line := OneLine(it.Text)
			key := trimListMarker(line)
			if len(key) >= 24 && seen[key] && it.Keep < Never {
				continue
			}
			if k, ok := quoted[key]; ok && it.Keep < Never && k >= it.Keep {
				continue
			}
			seen[key] = true
			kept = append(kept, it)
			for q := range quotes(line) {
				if k, ok := quoted[q]; !ok || k < it.Keep {
					quoted[q] = it.Keep
				}
			}
		}
		part.Items = kept
	}
}

// quotedMin is the shortest quotation Dedupe matches items against: below
// it a match is a name or a phrase, not the same statement.
const quotedMin = 48

// quotes yields the spans of s between “ and ” of at least quotedMin
// bytes.
func quotes(s string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for {
			i := strings.Index(s, "“")
			if i < 0 {
				return
			}
			s = s[i+len("“"):]
			j := strings.Index(s, "”")
			if j < 0 {
				return
			}
			if j >= quotedMin && !yield(s[:j]) {
				return
			}
			s = s[j+len("”"):]
		}
	}
}
