package structured

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
)

// Priorities of the offline items: the narrative goes first, then what
// was read, then what the previous summary carried, then the rest. The
// task, the next step and the modified files are never dropped.
const (
	keepOldNarrative = 0
	keepNarrative    = 1
	keepFocused      = 2
	keepRead         = 3
	keepPrevious     = 4
	keepStated       = 5
	// keepRequest is where a long request in progress gives way to its
	// head and tail within two fifths of the target: first of all, so a
	// pasted plan never crowds out the rest; Fit quotes it whole again
	// when the room allows.
	keepRequest = 0
	keepNext    = 7
)

// OfflineNote opens every summary built without a model.
const OfflineNote = "_Offline summary: built without a model from the folded messages. Requests, paths, commands and errors are verbatim; the rest is extracted, not interpreted._"

// offlineDoc fills the seven sections from the facts alone.
func offlineDoc(f *digest.Facts, focus string, target int) *digest.Doc {
	prev := previousSections(f.Previous)
	d := &digest.Doc{Preamble: OfflineNote}
	d.Parts = []digest.Part{
		activeTask(f, prev, focus, target),
		nextStep(f, prev),
		decisions(f, prev),
		files(f, prev),
		constraints(f, prev, focus),
		pending(f, prev),
		narrative(f, prev),
	}
	d.Dedupe()
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
		"The user's request in progress, verbatim:", "The agent's plan, as it last left it:", "Not fixed yet:", "Errors met since fixed:", "Errors not seen fixed:", "Found along the way:",
		"Not stated in the folded messages", "[… ",
		"This summarizes the start of the turn;", "Focus asked for this summary:", "Earlier task, from the previous summary:",
		"From the previous summary:", "Before, from the previous summary:", "Then:", "Done so far in this turn:",
		"Last errors seen (they may since be fixed):", "No user request in the folded messages.",
		"None stated in the folded messages.", "No decision stated in the folded messages.", "No rule stated by the user in the folded messages.",
		"Nothing left open in the folded messages.", "No file operations in the folded messages.", "Nothing happened in the folded messages.",
	} {
		if strings.HasPrefix(strings.TrimSpace(l), p) {
			return true
		}
	}
	t := strings.TrimSpace(l)
	return strings.HasPrefix(t, "(") && strings.HasSuffix(t, "left out to fit the size target.)")
}

func activeTask(f *digest.Facts, prev map[string][]string, focus string, target int) digest.Part {
	p := digest.Part{Title: ActiveTask, Empty: "No user request in the folded messages."}
	switch {
	case f.HasRequest:
		lead := "The user's request in progress, verbatim:"
		if f.Kind == abi.FoldTurnPrefix {
			lead = "The user's request for the turn in progress, verbatim:"
		}
		quote := digest.Item{Text: digest.QuoteRequest(f.Latest.Text, digest.RequestCap(target)), Keep: digest.Never}
		if short := digest.QuoteRequest(f.Latest.Text, digest.ShortRequestCap(target)); len(short) < len(quote.Text) {
			quote.Short, quote.Trim = short, keepRequest
		}
		p.Items = append(p.Items, digest.Item{Text: lead, Keep: digest.Never}, quote)
		if old := prev[ActiveTask]; len(old) > 0 {
			latest := digest.OneLine(f.Latest.Text)
			for _, l := range old {
				if !strings.Contains(latest, digest.OneLine(strings.TrimLeft(l, "> "))) {
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
		p.Items = append(p.Items, digest.Item{Text: "Focus asked for this summary: " + digest.Plain(focus), Keep: digest.Never})
	}
	return p
}

// nextStep states what comes next: the agent's plan as it last left it,
// what it last said it would do, and the errors not fixed since.
func nextStep(f *digest.Facts, prev map[string][]string) digest.Part {
	p := digest.Part{Title: NextStep, Empty: "Not stated in the folded messages: carry on with the request in progress.", Omitted: "(%d plan steps left out to fit the size target.)"}
	if f.HasPlan {
		done := 0
		for _, s := range f.Plan {
			if s.Done() {
				done++
			}
		}
		header := fmt.Sprintf("The agent's plan, as it last left it (%d of %d steps done):", done, len(f.Plan))
		for _, s := range f.Plan {
			if s.Done() {
				continue
			}
			keep := keepStated
			if s.Status == "in_progress" {
				keep = digest.Never
			}
			p.Items = append(p.Items, digest.Item{Text: fmt.Sprintf("- [%s] %s", s.Status, digest.Plain(digest.ClipHead(s.Text, 300))) + commandsSeen(s.Text, f), Keep: keep, Header: header})
		}
	}
	switch {
	case f.IntentionRan:
		p.Items = append(p.Items, digest.Item{Text: "- Done as the assistant last announced (its calls ran): “" + digest.Plain(f.Intention.Text) + "” No later step stated.", Keep: digest.Never})
	case f.HasIntention:
		p.Items = append(p.Items, digest.Item{Text: "- The assistant said it would next: “" + digest.Plain(f.Intention.Text) + "”" + commandsSeen(f.Intention.Text, f), Keep: digest.Never})
	}
	// Failed commands of the latest turn that no later run fixed are
	// work still to do; other failures are listed under pending items.
	var open []digest.Resolution
	for _, r := range f.Resolved {
		if r.FixedBy == "" && r.Instead == "" && r.Shell && (!f.HasRequest || r.Index > f.Latest.Index) {
			open = append(open, r)
		}
	}
	for _, r := range digest.Last(open, 3) {
		p.Items = append(p.Items, digest.Item{Text: "- " + digest.Code(r.Call) + " failed with " + digest.Code(firstLine(r.Text)), Keep: keepNext, Header: "Not fixed yet:"})
	}
	if len(p.Items) == 0 {
		for _, l := range prev[NextStep] {
			p.Items = append(p.Items, digest.Item{Text: l, Keep: keepPrevious, Header: "From the previous summary:"})
		}
	}
	return p
}

// commandsSeen names the commands the session ran for the kinds of work
// a step names, so the step says how it is done here.
func commandsSeen(step string, f *digest.Facts) string {
	cmds := f.CommandsFor(step)
	if len(cmds) == 0 {
		return ""
	}
	for i, c := range cmds {
		cmds[i] = digest.Code(c)
	}
	return " (ran before for this: " + strings.Join(cmds, ", ") + ")"
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return digest.ClipHead(l, 240)
}

func decisions(f *digest.Facts, prev map[string][]string) digest.Part {
	p := digest.Part{Title: KeyDecisions, Empty: "No decision stated in the folded messages.", Omitted: "(%d decisions left out to fit the size target.)"}
	for _, d := range digest.Last(f.Decided, 12) {
		var text string
		switch {
		case strings.HasPrefix(d.Rejected, "turned down by the user"):
			text = "- Rejected, " + d.Rejected + ". It had said: " + d.Text
		case d.Rejected != "":
			text = "- Ruled out" + reasoningLabel(d.Statement) + ": " + d.Text
		case d.Cause:
			text = "- Cause" + reasoningLabel(d.Statement) + ": " + d.Text
		default:
			text = "- Decided" + reasoningLabel(d.Statement) + ": " + d.Text
		}
		keep := stated(d.Text, f.Focus)
		if d.Reason || d.Rejected != "" {
			keep++
		}
		if d.Reasoning {
			keep = keepRead // thought on the way; what the agent said goes first
		}
		p.Items = append(p.Items, digest.Item{Text: text, Keep: keep})
	}
	p.Items = append(p.Items, previousItems(prev[KeyDecisions], nil)...)
	return p
}

// reasoningLabel marks what the agent only thought, so a reader tells it
// from what the agent said.
func reasoningLabel(s digest.Statement) string {
	if s.Reasoning {
		return " (in its reasoning)"
	}
	return ""
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
	earlier := map[string]string{} // path -> its line in the previous summary
	group := ""
	for _, l := range prev[FilesArtifacts] {
		switch strings.TrimSpace(l) {
		case "Modified:", "Read:":
			group = strings.TrimSuffix(strings.TrimSpace(l), ":")
			continue
		}
		path := previousPath(l)
		switch {
		case group == "Modified" && strings.HasPrefix(strings.TrimSpace(l), "- `"):
			modified = appendNew(modified, path)
			earlier[path] = strings.TrimSpace(l)
		case group == "Read" && strings.HasPrefix(strings.TrimSpace(l), "- `"):
			if !contains(modified, path) {
				read = appendNew(read, path)
			}
		default:
			rest = append(rest, l)
		}
	}
	for _, m := range modified {
		it := digest.Item{Text: "- " + digest.Code(m), Keep: digest.Never, Header: "Modified:"}
		if c, ok := changeOf(f.Changes, m); ok {
			it.Text = "- " + c.Line()
			if short := "- " + c.Brief(); short != it.Text {
				it.Short, it.Trim = short, detailKeep(c)
			}
		} else if l, ok := earlier[m]; ok {
			it.Text = l
			if short := "- " + digest.Code(m); short != l {
				it.Short, it.Trim = short, keepRead
			}
		}
		p.Items = append(p.Items, it)
	}
	for _, r := range read {
		if contains(modified, r) {
			continue
		}
		keep := keepRead
		if digest.Relevant(r, f.Focus) {
			keep = keepStated
		}
		p.Items = append(p.Items, digest.Item{Text: "- " + digest.Code(r), Keep: keep, Header: "Read:"})
	}
	for _, img := range digest.Last(f.Images, 5) {
		p.Items = append(p.Items, digest.Item{Text: "- an image from the " + img.Role + " (" + img.String() + "), left out", Keep: keepRead, Header: "Images:"})
	}
	p.Items = append(p.Items, previousItems(rest, append(modified, read...))...)
	return p
}

// detailKeep is how long a changed file keeps the detail of its change
// when room runs short (its path is never dropped): a file the shell
// wrote (a script made along the way) gives it up first, one edited
// more than once last.
func detailKeep(c digest.FileChange) int {
	switch {
	case c.ByShell() && c.Edits <= 1:
		return keepNarrative
	case c.Edits > 1:
		return keepStated
	}
	return keepRead
}

// changeOf finds the change record of path, which the host may name
// absolutely where the calls named it relative to their directory.
func changeOf(changes []digest.FileChange, path string) (digest.FileChange, bool) {
	for _, c := range changes {
		if c.Path == path {
			return c, true
		}
	}
	for _, c := range changes {
		if strings.HasSuffix(path, "/"+c.Path) || strings.HasSuffix(c.Path, "/"+path) {
			return c, true
		}
	}
	return digest.FileChange{}, false
}

// previousPath is the path a file line of an earlier summary opens with.
func previousPath(l string) string {
	t := strings.TrimPrefix(strings.TrimSpace(l), "- ")
	if strings.HasPrefix(t, "`") {
		if p := digest.Backquoted(t); len(p) > 0 {
			return strings.TrimSpace(p[0])
		}
	}
	return strings.Trim(t, "`")
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
	p := digest.Part{Title: Constraints, Empty: "No rule stated by the user in the folded messages.", Omitted: "(%d constraints left out to fit the size target.)"}
	var said []digest.Statement
	for _, s := range f.Constraints {
		// The request in progress is quoted whole above.
		if !f.HasRequest || s.Index != f.Latest.Index {
			said = append(said, s)
		}
	}
	for _, s := range digest.Last(said, 12) {
		p.Items = append(p.Items, digest.Item{Text: "- The user said: “" + digest.Plain(digest.ClipHead(s.Text, 400)) + "”", Keep: stated(s.Text, f.Focus)})
	}
	p.Items = append(p.Items, previousItems(prev[Constraints], nil)...)
	return p
}

func pending(f *digest.Facts, prev map[string][]string) digest.Part {
	p := digest.Part{Title: PendingItems, Empty: "Nothing left open in the folded messages.", Omitted: "(%d pending items left out to fit the size target.)"}
	for _, s := range digest.Last(f.Open, 10) {
		if f.HasIntention && s.Text == f.Intention.Text || !digest.Balanced(s.Text) && len(s.Text) < 20 {
			continue
		}
		p.Items = append(p.Items, digest.Item{Text: "- " + digest.Plain(s.Text), Keep: stated(s.Text, f.Focus)})
	}
	var fixed, other []digest.Resolution
	for _, r := range f.Resolved {
		switch {
		case r.FixedBy != "" || r.Instead != "":
			fixed = append(fixed, r)
		case !r.Shell || f.HasRequest && r.Index < f.Latest.Index:
			other = append(other, r)
		}
	}
	for _, r := range digest.Last(other, 3) {
		text := "- " + digest.Code(r.Call) + " failed with " + digest.Code(firstLine(r.Text))
		p.Items = append(p.Items, digest.Item{Text: text, Keep: keepRead, Header: "Errors not seen fixed:"})
	}
	// An error already fixed is history, kept beside its fix: when room
	// runs short it gives way before an error nothing has fixed yet.
	for _, r := range digest.Last(fixed, 5) {
		text := "- " + digest.Code(r.Call) + " failed with " + digest.Code(firstLine(r.Text)) + "; fixed: " + digest.Code(r.FixedBy) + " passed later"
		if r.FixedBy == "" {
			text = "- " + digest.Code(r.Call) + " failed with " + digest.Code(firstLine(r.Text)) + "; went another way: " + digest.Code(r.Instead) + " ran after it"
		}
		p.Items = append(p.Items, digest.Item{Text: text, Keep: keepFocused, Header: "Errors met since fixed:"})
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
		// The last turns keep more of the assistant's closing report: it
		// is the agent's own account of what it did (commits, results),
		// and the last one ranks with the findings.
		width := 200
		switch {
		case i == len(f.Turns)-1:
			width, keep = 1200, keepStated-1
		case i >= len(f.Turns)-3:
			width, keep = 800, keep+1
		}
		line := func(width int) string {
			if f.HasRequest && t.Start == f.Latest.Index {
				return t.LineAs("User: the request in progress, quoted above.", width)
			}
			return t.Line(width)
		}
		it := digest.Item{Text: strconv.Itoa(i+1) + ". " + line(width), Keep: keep, Header: header}
		if short := strconv.Itoa(i+1) + ". " + line(200); width > 200 && short != it.Text {
			it.Short, it.Trim = short, keepNarrative+1
		}
		p.Items = append(p.Items, it)
	}
	return findings(f, p)
}

// findings adds what the assistant reported established along the way
// and what the latest commands returned.
func findings(f *digest.Facts, p digest.Part) digest.Part {
	for i, o := range f.Outcomes {
		keep := keepRead
		if i >= len(f.Outcomes)-3 {
			keep = keepPrevious
		}
		p.Items = append(p.Items, resultItem(o.Call, o.Lines, keep, "Commands returned (their last run):"))
	}
	for _, m := range f.Matches {
		// Lowest priority: the first to go when room runs short.
		p.Items = append(p.Items, resultItem(m.Call, m.Lines, keepOldNarrative, "Searches found:"))
	}
	for _, r := range f.Refs {
		p.Items = append(p.Items, digest.Item{Text: "- " + r.String(), Keep: keepStated, Header: "Named in the commands:"})
	}
	for _, s := range digest.Last(f.Findings, 40) {
		keep := stated(s.Text, f.Focus) - 1
		if s.Reasoning {
			keep-- // thought on the way; what the agent said goes first
		}
		p.Items = append(p.Items, digest.Item{Text: "- " + strings.TrimPrefix(reasoningLabel(s)+" ", " ") + digest.Plain(s.Text), Keep: keep, Header: "Found along the way:"})
	}
	return p
}

// resultItem lists what a call returned: "- `call` → `line`; `line`".
func resultItem(call string, lines []string, keep int, header string) digest.Item {
	quoted := make([]string, len(lines))
	for j, l := range lines {
		quoted[j] = digest.Code(l)
	}
	return digest.Item{Text: "- " + digest.Code(call) + " → " + strings.Join(quoted, "; "), Keep: keep, Header: header}
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
		text := "- " + digest.Code(c.Brief(160))
		if c.Result != nil {
			if e, ok := failed[c.Result.Index]; ok {
				text += " → error: " + digest.Code(digest.ClipHead(strings.ReplaceAll(e, "\n", " / "), 200))
			}
		}
		keep := keepNarrative
		if digest.Relevant(text, f.Focus) {
			keep = keepFocused
		}
		p.Items = append(p.Items, digest.Item{Text: text, Keep: keep, Header: header})
	}
	if n := len(f.Turns); n > 0 && f.Turns[n-1].Outcome != "" {
		p.Items = append(p.Items, digest.Item{Text: "Last said: “" + digest.Plain(digest.Gist(f.Turns[n-1].Outcome, 600)) + "”", Keep: keepStated, Header: header})
	}
	return findings(f, p)
}
