package narrative

import (
	"fmt"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
)

// Priorities for fitting: the earlier story goes first, then the newer
// one, then files only read; the task and the modified files stay.
const (
	keepEarlier = 0
	keepStory   = 1
	keepFocused = 2
	keepRead    = 3
	keepStated  = 4
)

func offlineDoc(f *digest.Facts, focus string, target int) *digest.Doc {
	d := &digest.Doc{Preamble: OfflineNote, Prose: true}

	task := digest.Part{Title: "Current task", Empty: "The folded messages hold no user request."}
	if f.HasRequest {
		lead := "The user's latest request was:"
		if f.Kind == abi.FoldTurnPrefix {
			lead = "In the turn still in progress, the user asked:"
		}
		task.Items = append(task.Items, digest.Item{Text: lead + "\n\n" + digest.QuoteRequest(f.Latest.Text, digest.RequestCap(target)), Keep: digest.Never})
	}
	next := digest.Part{Title: "Next step", Empty: "None stated; carry on with the request in progress."}
	if f.HasPlan {
		var todo []string
		done := 0
		for _, s := range f.Plan {
			if s.Done() {
				done++
			} else {
				todo = append(todo, digest.Plain(digest.ClipHead(s.Text, 200))+" ("+strings.ReplaceAll(s.Status, "_", " ")+")")
			}
		}
		if len(todo) > 0 {
			next.Items = append(next.Items, digest.Item{Text: fmt.Sprintf("The agent's plan had %d of %d steps done; left: %s.", done, len(f.Plan), strings.Join(todo, "; ")), Keep: digest.Never})
		}
	}
	switch {
	case f.IntentionRan:
		next.Items = append(next.Items, digest.Item{Text: "It last did as it announced (its calls ran): “" + digest.Plain(f.Intention.Text) + "”", Keep: digest.Never})
	case f.HasIntention:
		next.Items = append(next.Items, digest.Item{Text: "It said it would next: “" + digest.Plain(f.Intention.Text) + "”", Keep: digest.Never})
	}
	for _, r := range f.Resolved {
		if r.FixedBy == "" && r.Instead == "" && r.Shell && (!f.HasRequest || r.Index > f.Latest.Index) {
			next.Items = append(next.Items, digest.Item{Text: digest.Code(r.Call) + " still fails with " + digest.Code(firstLine(r.Text)) + ".", Keep: keepStated + 1})
		}
	}
	focused := digest.Part{Title: "Focus"}
	if focus = strings.TrimSpace(focus); focus != "" {
		focused.Items = append(focused.Items, digest.Item{Text: "This summary was asked to focus on: " + digest.OneLine(focus) + ".", Keep: digest.Never})
	}

	before := digest.Part{Title: "Before", Omitted: "(%d earlier passages left out to fit the size target.)"}
	for _, p := range f.Previous {
		for _, para := range paragraphs(p) {
			before.Items = append(before.Items, digest.Item{Text: para, Keep: keepEarlier})
		}
	}

	story := digest.Part{Title: "What happened", Empty: "Nothing happened in the folded messages.", Omitted: "(%d earlier steps left out to fit the size target.)"}
	if f.Kind == abi.FoldTurnPrefix {
		for _, c := range f.Calls {
			s := "It ran " + digest.Code(c.Brief(160))
			if c.Result != nil && c.Result.IsError {
				s += ", which failed"
			}
			story.Items = append(story.Items, digest.Item{Text: s + ".", Keep: keepStory})
		}
	} else {
		for i, t := range f.Turns {
			keep := keepStory
			if digest.Relevant(t.Request+" "+t.Outcome, f.Focus) {
				keep = keepFocused
			}
			recent := i >= len(f.Turns)-3
			text := turnProse(i, t, recent)
			if f.HasRequest && t.Start == f.Latest.Index {
				t.Request = ""
				text = "Then came the request in progress, quoted above." + strings.TrimPrefix(turnProse(i, t, recent), "The folded part opens mid-task.")
			}
			story.Items = append(story.Items, digest.Item{Text: text, Keep: keep})
		}
	}

	files := digest.Part{Title: "Files", Empty: "No file was read or modified.", Omitted: "(The files only read were left out to fit the size target.)%.0d"}
	if len(f.Files.Modified) > 0 {
		var changed []string
		for _, m := range f.Files.Modified {
			line := digest.Code(m)
			for _, c := range f.Changes {
				if c.Path == m || strings.HasSuffix(m, "/"+c.Path) {
					line = c.Line()
					break
				}
			}
			changed = append(changed, line)
		}
		files.Items = append(files.Items, digest.Item{Text: "Modified: " + strings.Join(changed, "; ") + ".", Keep: digest.Never})
	}
	for _, img := range digest.Last(f.Images, 5) {
		files.Items = append(files.Items, digest.Item{Text: "An image from the " + img.Role + " (" + img.String() + ") was left out.", Keep: keepRead})
	}
	if len(f.Files.Read) > 0 {
		files.Items = append(files.Items, digest.Item{Text: "Read: " + codeJoin(f.Files.Read) + ".", Keep: keepRead})
	}

	decided := digest.Part{Title: "Decisions", Omitted: "(%d decisions left out to fit the size target.)"}
	for _, d := range digest.Last(f.Decided, 10) {
		text := "Decided: " + d.Text
		switch {
		case strings.HasPrefix(d.Rejected, "turned down by the user"):
			text = "Rejected, " + d.Rejected + "; it had said: " + d.Text
		case d.Rejected != "":
			text = "Ruled out: " + d.Text
		case d.Cause:
			text = "Cause: " + d.Text
		}
		decided.Items = append(decided.Items, digest.Item{Text: text, Keep: keepStated})
	}
	for _, s := range digest.Last(f.Constraints, 8) {
		if f.HasRequest && s.Index == f.Latest.Index {
			continue // quoted whole above
		}
		decided.Items = append(decided.Items, digest.Item{Text: "The user said: “" + digest.Plain(digest.ClipHead(s.Text, 400)) + "”", Keep: keepStated})
	}

	open := digest.Part{Title: "Still open", Omitted: "(%d open items left out to fit the size target.)"}
	for _, s := range digest.Last(f.Open, 8) {
		if f.HasIntention && s.Text == f.Intention.Text {
			continue
		}
		open.Items = append(open.Items, digest.Item{Text: digest.Plain(s.Text), Keep: keepStated})
	}
	for _, r := range digest.Last(f.Resolved, 4) {
		text := digest.Code(r.Call) + " failed with " + digest.Code(firstLine(r.Text))
		switch {
		case r.FixedBy != "":
			text += "; fixed: " + digest.Code(r.FixedBy) + " passed later."
		case r.Instead != "":
			text += "; went another way: " + digest.Code(r.Instead) + " ran after it."
		case r.Shell && (!f.HasRequest || r.Index > f.Latest.Index):
			continue // under the next step
		default:
			text += "."
		}
		open.Items = append(open.Items, digest.Item{Text: text, Keep: keepStated})
	}

	found := digest.Part{Title: "Found along the way", Omitted: "(%d findings left out to fit the size target.)"}
	for _, st := range digest.Last(f.Findings, 40) {
		found.Items = append(found.Items, digest.Item{Text: digest.Plain(st.Text), Keep: keepRead})
	}

	d.Parts = []digest.Part{task, next, focused, before, story, files, decided, found, open}
	d.Dedupe()
	return d
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return digest.ClipHead(l, 240)
}

// turnProse tells one turn; a recent one keeps more of the assistant's
// closing report, the agent's own account of what it did.
func turnProse(i int, t digest.Turn, recent bool) string {
	var b strings.Builder
	switch {
	case t.Request == "":
		b.WriteString("The folded part opens mid-task.")
	case i == 0:
		fmt.Fprintf(&b, "The user asked: “%s”", digest.Plain(digest.ClipHead(digest.OneLine(t.Request), 300)))
	default:
		fmt.Fprintf(&b, "Then the user asked: “%s”", digest.Plain(digest.ClipHead(digest.OneLine(t.Request), 300)))
	}
	if len(t.Tools) > 0 {
		fmt.Fprintf(&b, " The assistant used %s", digest.FormatTools(t.Tools))
		if len(t.Modified) > 0 {
			fmt.Fprintf(&b, " and modified %s", codeJoin(t.Modified))
		}
		b.WriteString(".")
	}
	if t.Errors == 1 {
		b.WriteString(" One call failed.")
	} else if t.Errors > 1 {
		fmt.Fprintf(&b, " %d calls failed.", t.Errors)
	}
	if t.Outcome != "" {
		width := 300
		if recent {
			width = 800
		}
		fmt.Fprintf(&b, " It ended with: “%s”", digest.Plain(digest.Gist(t.Outcome, width)))
	}
	return b.String()
}

func codeJoin(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = "`" + s + "`"
	}
	return strings.Join(q, ", ")
}

// paragraphs flattens a previous summary into prose passages: headings
// and offline notes go, each section's lines run together.
func paragraphs(summary string) []string {
	var out []string
	for _, s := range digest.ParseSections(summary) {
		var lines []string
		for _, l := range digest.Lines(s.Body) {
			if strings.HasPrefix(l, "_Offline summary") || strings.HasPrefix(strings.TrimSpace(l), "(") && strings.HasSuffix(l, "left out to fit the size target.)") {
				continue
			}
			lines = append(lines, strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "-*>")))
		}
		if len(lines) == 0 {
			continue
		}
		text := strings.Join(lines, " ")
		if s.Title != "" {
			text = s.Title + ": " + text
		}
		out = append(out, text)
	}
	return out
}
