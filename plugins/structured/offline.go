package structured

import (
	"fmt"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
)

// Priorities of the offline items: the narrative goes first, then what
// was read, then what the previous summary carried, then the rest. The
// task and the modified files are never dropped.
const (
	keepOldNarrative = 0
	keepNarrative    = 1
	keepFocused      = 2
	keepRead         = 3
	keepPrevious     = 4
	keepStated       = 5
)

// OfflineNote opens every summary built without a model.
const OfflineNote = "_Offline summary: built without a model from the folded messages. Requests, paths, commands and errors are verbatim; the rest is extracted, not interpreted._"

// maxRequestBytes bounds a request quoted as the active task. Longer ones
// (a pasted plan) keep their head and tail.
const maxRequestBytes = 6000

// offlineDoc fills the six sections from the facts alone.
func offlineDoc(f *digest.Facts, focus string) *digest.Doc {
	prev := previousSections(f.Previous)
	d := &digest.Doc{Preamble: OfflineNote}
	d.Parts = []digest.Part{
		activeTask(f, prev, focus),
		decisions(f, prev),
		files(f, prev),
		constraints(f, prev, focus),
		pending(f, prev),
		narrative(f, prev),
	}
	return d
}

// previousSections reads the summaries to merge. One that is not in the
// six-section form is kept whole as earlier narrative.
func previousSections(prev []string) map[string][]string {
	out := map[string][]string{}
	for _, p := range prev {
		secs := digest.ParseSections(p)
		known := false
		for _, s := range secs {
			for _, t := range Sections {
				if digest.TitleKey(s.Title) == digest.TitleKey(t) {
					known = true
					out[t] = append(out[t], digest.Lines(s.Body)...)
				}
			}
		}
		if !known {
			out[Narrative] = append(out[Narrative], digest.Lines(p)...)
		}
	}
	for t, lines := range out {
		kept := lines[:0]
		for _, l := range lines {
			if !boilerplate(l) {
				kept = append(kept, l)
			}
		}
		out[t] = kept
	}
	return out
}

// boilerplate reports whether l is one of the fixed lines an offline
// summary writes, which a merge must not carry forward as content.
func boilerplate(l string) bool {
	for _, p := range []string{
		"_Offline summary", "The user's latest request, verbatim:", "The user's request for the turn in progress, verbatim:",
		"This summarizes the start of the turn;", "Focus asked for this summary:", "Earlier task, from the previous summary:",
		"From the previous summary:", "Before, from the previous summary:", "Then:", "Done so far in this turn:",
		"Last errors seen (they may since be fixed):", "No user request in the folded messages.",
		"None stated in the folded messages.", "No file operations in the folded messages.", "Nothing happened in the folded messages.",
	} {
		if strings.HasPrefix(strings.TrimSpace(l), p) {
			return true
		}
	}
	t := strings.TrimSpace(l)
	return strings.HasPrefix(t, "(") && strings.HasSuffix(t, "left out to fit the size target.)")
}

func bullet(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "- ") || strings.HasPrefix(s, "* ") {
		return s
	}
	return "- " + s
}

func activeTask(f *digest.Facts, prev map[string][]string, focus string) digest.Part {
	p := digest.Part{Title: ActiveTask, Empty: "No user request in the folded messages."}
	switch {
	case f.HasRequest:
		lead := "The user's latest request, verbatim:"
		if f.Kind == abi.FoldTurnPrefix {
			lead = "The user's request for the turn in progress, verbatim:"
		}
		p.Items = append(p.Items,
			digest.Item{Text: lead, Keep: digest.Never},
			digest.Item{Text: quote(digest.Clip(f.Latest.Text, maxRequestBytes)), Keep: digest.Never})
		if old := prev[ActiveTask]; len(old) > 0 {
			for _, l := range old {
				if !strings.Contains(f.Latest.Text, strings.TrimLeft(l, "> ")) {
					p.Items = append(p.Items, digest.Item{Text: l, Keep: keepPrevious, Header: "Earlier task, from the previous summary:"})
				}
			}
		}
	case len(prev[ActiveTask]) > 0:
		for _, l := range prev[ActiveTask] {
			p.Items = append(p.Items, digest.Item{Text: l, Keep: digest.Never})
		}
	}
	if f.Kind == abi.FoldTurnPrefix {
		p.Items = append(p.Items, digest.Item{Text: "This summarizes the start of the turn; the rest of the turn follows verbatim.", Keep: digest.Never})
	}
	if focus = strings.TrimSpace(focus); focus != "" {
		p.Items = append(p.Items, digest.Item{Text: "Focus asked for this summary: " + digest.OneLine(focus), Keep: digest.Never})
	}
	return p
}

// quote writes text as a markdown block quote, line by line.
func quote(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("> "+l, " ")
	}
	return strings.Join(lines, "\n")
}

func decisions(f *digest.Facts, prev map[string][]string) digest.Part {
	p := digest.Part{Title: KeyDecisions, Empty: "None stated in the folded messages.", Omitted: "(%d decisions left out to fit the size target.)"}
	for _, s := range digest.Last(f.Decisions, 12) {
		p.Items = append(p.Items, digest.Item{Text: bullet(s.Text), Keep: stated(s.Text, f.Focus)})
	}
	p.Items = append(p.Items, previousItems(prev[KeyDecisions], nil)...)
	return p
}

func stated(text string, focus []string) int {
	if digest.Relevant(text, focus) {
		return keepStated + 1
	}
	return keepStated
}

// previousItems turns the lines of a previous section into items, leaving
// out those that name something in skip.
func previousItems(lines []string, skip []string) []digest.Item {
	var out []digest.Item
	for _, l := range lines {
		if mentionsAny(l, skip) || strings.HasPrefix(l, "(") && strings.HasSuffix(l, "left out to fit the size target.)") {
			continue
		}
		out = append(out, digest.Item{Text: l, Keep: keepPrevious, Header: "From the previous summary:"})
	}
	return out
}

func mentionsAny(line string, names []string) bool {
	for _, n := range names {
		if strings.Contains(line, n) {
			return true
		}
	}
	return false
}

func files(f *digest.Facts, prev map[string][]string) digest.Part {
	p := digest.Part{Title: FilesArtifacts, Empty: "No file operations in the folded messages.", Omitted: "(%d files read left out to fit the size target.)"}
	modified := append([]string{}, f.Files.Modified...)
	read := append([]string{}, f.Files.Read...)
	// A previous offline summary lists its files under the same headers:
	// they join the lists, modified ones stay never dropped.
	var rest []string
	group := ""
	for _, l := range prev[FilesArtifacts] {
		switch strings.TrimSpace(l) {
		case "Modified:", "Read:":
			group = strings.TrimSuffix(strings.TrimSpace(l), ":")
			continue
		}
		path := strings.Trim(strings.TrimPrefix(strings.TrimSpace(l), "- "), "`")
		switch {
		case group == "Modified" && strings.HasPrefix(strings.TrimSpace(l), "- `"):
			modified = appendNew(modified, path)
		case group == "Read" && strings.HasPrefix(strings.TrimSpace(l), "- `"):
			if !contains(modified, path) {
				read = appendNew(read, path)
			}
		default:
			rest = append(rest, l)
		}
	}
	for _, m := range modified {
		p.Items = append(p.Items, digest.Item{Text: "- `" + m + "`", Keep: digest.Never, Header: "Modified:"})
	}
	for _, r := range read {
		if contains(modified, r) {
			continue
		}
		keep := keepRead
		if digest.Relevant(r, f.Focus) {
			keep = keepStated
		}
		p.Items = append(p.Items, digest.Item{Text: "- `" + r + "`", Keep: keep, Header: "Read:"})
	}
	p.Items = append(p.Items, previousItems(rest, append(modified, read...))...)
	return p
}

func appendNew(list []string, s string) []string {
	if s == "" || contains(list, s) {
		return list
	}
	return append(list, s)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func constraints(f *digest.Facts, prev map[string][]string, focus string) digest.Part {
	p := digest.Part{Title: Constraints, Empty: "None stated in the folded messages.", Omitted: "(%d constraints left out to fit the size target.)"}
	for _, s := range digest.Last(f.Constraints, 12) {
		p.Items = append(p.Items, digest.Item{Text: bullet(digest.ClipHead(s.Text, 400)), Keep: stated(s.Text, f.Focus)})
	}
	p.Items = append(p.Items, previousItems(prev[Constraints], nil)...)
	return p
}

func pending(f *digest.Facts, prev map[string][]string) digest.Part {
	p := digest.Part{Title: PendingItems, Empty: "None stated in the folded messages.", Omitted: "(%d pending items left out to fit the size target.)"}
	for _, s := range digest.Last(f.Open, 10) {
		p.Items = append(p.Items, digest.Item{Text: bullet(s.Text), Keep: stated(s.Text, f.Focus)})
	}
	for _, e := range digest.Last(f.Errors, 5) {
		text := fmt.Sprintf("- `%s`: %s", e.Call, strings.ReplaceAll(e.Text, "\n", " / "))
		p.Items = append(p.Items, digest.Item{Text: text, Keep: stated(e.Text, f.Focus), Header: "Last errors seen (they may since be fixed):"})
	}
	p.Items = append(p.Items, previousItems(prev[PendingItems], nil)...)
	return p
}

func narrative(f *digest.Facts, prev map[string][]string) digest.Part {
	p := digest.Part{Title: Narrative, Empty: "Nothing happened in the folded messages.", Omitted: "(%d earlier entries left out to fit the size target.)"}
	for _, l := range prev[Narrative] {
		if strings.HasPrefix(l, "(") && strings.HasSuffix(l, "left out to fit the size target.)") {
			continue
		}
		p.Items = append(p.Items, digest.Item{Text: l, Keep: keepOldNarrative, Header: "Before, from the previous summary:"})
	}
	header := ""
	if len(p.Items) > 0 {
		header = "Then:"
	}
	if f.Kind == abi.FoldTurnPrefix {
		return turnSteps(f, p, header)
	}
	for i, t := range f.Turns {
		keep := keepNarrative
		if digest.Relevant(t.Request+" "+t.Outcome, f.Focus) {
			keep = keepFocused
		}
		p.Items = append(p.Items, digest.Item{Text: fmt.Sprintf("%d. %s", i+1, t.Line(200)), Keep: keep, Header: header})
	}
	return p
}

// turnSteps narrates a turn prefix call by call: what was done so far.
func turnSteps(f *digest.Facts, p digest.Part, header string) digest.Part {
	if header == "" {
		header = "Done so far in this turn:"
	}
	failed := map[int]string{}
	for _, e := range f.Errors {
		failed[e.Index] = e.Text
	}
	for _, c := range f.Calls {
		text := "- " + c.Brief(160)
		if c.Result != nil {
			if e, ok := failed[c.Result.Index]; ok {
				text += " → error: " + digest.ClipHead(strings.ReplaceAll(e, "\n", " / "), 200)
			}
		}
		keep := keepNarrative
		if digest.Relevant(text, f.Focus) {
			keep = keepFocused
		}
		p.Items = append(p.Items, digest.Item{Text: text, Keep: keep, Header: header})
	}
	if n := len(f.Turns); n > 0 && f.Turns[n-1].Outcome != "" {
		p.Items = append(p.Items, digest.Item{Text: "Last said: “" + digest.FirstSentence(f.Turns[n-1].Outcome, 300) + "”", Keep: keepStated, Header: header})
	}
	return p
}
