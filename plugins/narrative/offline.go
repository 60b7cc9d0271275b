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

func offlineDoc(f *digest.Facts, focus string) *digest.Doc {
	d := &digest.Doc{Preamble: OfflineNote, Prose: true}

	task := digest.Part{Title: "Current task", Empty: "The folded messages hold no user request."}
	if f.HasRequest {
		lead := "The user's latest request was:"
		if f.Kind == abi.FoldTurnPrefix {
			lead = "In the turn still in progress, the user asked:"
		}
		task.Items = append(task.Items, digest.Item{Text: lead + "\n\n" + quote(digest.Clip(f.Latest.Text, 6000)), Keep: digest.Never})
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
			s := "It ran `" + c.Brief(160) + "`"
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
			story.Items = append(story.Items, digest.Item{Text: turnProse(i, t), Keep: keep})
		}
	}

	files := digest.Part{Title: "Files", Empty: "No file was read or modified.", Omitted: "(The files only read were left out to fit the size target.)%.0d"}
	if len(f.Files.Modified) > 0 {
		files.Items = append(files.Items, digest.Item{Text: "Modified: " + codeJoin(f.Files.Modified) + ".", Keep: digest.Never})
	}
	if len(f.Files.Read) > 0 {
		files.Items = append(files.Items, digest.Item{Text: "Read: " + codeJoin(f.Files.Read) + ".", Keep: keepRead})
	}

	decided := digest.Part{Title: "Decisions", Omitted: "(%d decisions left out to fit the size target.)"}
	for _, s := range digest.Last(f.Decisions, 10) {
		decided.Items = append(decided.Items, digest.Item{Text: s.Text, Keep: keepStated})
	}
	for _, s := range digest.Last(f.Constraints, 8) {
		decided.Items = append(decided.Items, digest.Item{Text: "The user said: “" + digest.ClipHead(s.Text, 400) + "”", Keep: keepStated})
	}

	open := digest.Part{Title: "Still open", Omitted: "(%d open items left out to fit the size target.)"}
	for _, s := range digest.Last(f.Open, 8) {
		open.Items = append(open.Items, digest.Item{Text: s.Text, Keep: keepStated})
	}
	for _, e := range digest.Last(f.Errors, 3) {
		open.Items = append(open.Items, digest.Item{Text: fmt.Sprintf("`%s` failed with: %s.", e.Call, strings.ReplaceAll(e.Text, "\n", " / ")), Keep: keepStated})
	}

	d.Parts = []digest.Part{task, focused, before, story, files, decided, open}
	return d
}

func turnProse(i int, t digest.Turn) string {
	var b strings.Builder
	switch {
	case t.Request == "":
		b.WriteString("The folded part opens mid-task.")
	case i == 0:
		fmt.Fprintf(&b, "The user asked: “%s”", digest.ClipHead(digest.OneLine(t.Request), 300))
	default:
		fmt.Fprintf(&b, "Then the user asked: “%s”", digest.ClipHead(digest.OneLine(t.Request), 300))
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
		fmt.Fprintf(&b, " It ended with: “%s”", digest.FirstSentence(t.Outcome, 300))
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

func quote(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("> "+l, " ")
	}
	return strings.Join(lines, "\n")
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
