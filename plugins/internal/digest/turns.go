package digest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// ToolCount is how often one tool was called.
type ToolCount struct {
	Name  string
	Count int
}

// CountTools counts calls by tool name, most used first, then by name.
func CountTools(calls []Call) []ToolCount {
	counts := map[string]int{}
	for _, c := range calls {
		name := c.Name
		if name == "" {
			name = "(unnamed)"
		}
		counts[name]++
	}
	out := make([]ToolCount, 0, len(counts))
	for n, c := range counts {
		out = append(out, ToolCount{n, c})
	}
	slices.SortFunc(out, func(a, b ToolCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// FormatTools writes counts as "Bash ×3, Read ×2".
func FormatTools(counts []ToolCount) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = c.Name + " ×" + strconv.Itoa(c.Count)
	}
	return strings.Join(parts, ", ")
}

// Turn is one user request and what followed it up to the next request.
type Turn struct {
	// Start and End bound the turn's messages: msgs[Start:End].
	Start, End int
	// Request is the user's request; "" for messages before the first one.
	Request  string
	Tools    []ToolCount
	Modified []string
	Errors   int
	// Outcome is the last thing the assistant said in the turn.
	Outcome string
}

// Turns splits msgs at user requests.
func Turns(msgs []abi.Message) []Turn {
	calls := Calls(msgs)
	return turnsOf(msgs, Requests(msgs), calls, errorsOf(msgs, calls))
}

// turnsOf is Turns with the requests, calls and error notes of msgs
// already extracted (both lists in message order). A turn's calls are those
// whose tool_use lies in it, its errors the notes of the results that lie
// in it.
func turnsOf(msgs []abi.Message, reqs []Request, calls []Call, errs []ErrorNote) []Turn {
	var bounds []Request
	if len(reqs) == 0 || reqs[0].Index > 0 {
		bounds = append(bounds, Request{Index: 0})
	}
	bounds = append(bounds, reqs...)
	var turns []Turn
	nextCall, nextErr := 0, 0
	for i, r := range bounds {
		end := len(msgs)
		if i+1 < len(bounds) {
			end = bounds[i+1].Index
		}
		if r.Index >= end {
			continue
		}
		first := nextCall
		for first < len(calls) && calls[first].Index < r.Index {
			first++
		}
		nextCall = first
		for nextCall < len(calls) && calls[nextCall].Index < end {
			nextCall++
		}
		turnCalls := calls[first:nextCall]
		t := Turn{Start: r.Index, End: end, Request: r.Text, Tools: CountTools(turnCalls)}
		var ops opSet
		open := ""
		for _, c := range turnCalls {
			callOps(c, &ops, &open)
		}
		t.Modified = ops.modified
		for nextErr < len(errs) && errs[nextErr].Index < r.Index {
			nextErr++
		}
		for nextErr < len(errs) && errs[nextErr].Index < end {
			nextErr++
			t.Errors++
		}
		part := msgs[r.Index:end]
		for j := len(part) - 1; j >= 0; j-- {
			if part[j].Role == abi.RoleAssistant {
				if s := strings.TrimSpace(part[j].Text()); s != "" {
					t.Outcome = s
					break
				}
			}
		}
		turns = append(turns, t)
	}
	return turns
}

// Line describes the turn on one line for a narrative, with the request
// and the outcome clipped to max bytes each.
func (t Turn) Line(max int) string {
	lead := "(Continuing from before.)"
	if t.Request != "" {
		lead = "User: “" + Plain(ClipHead(OneLine(t.Request), max)) + "”"
	}
	return t.LineAs(lead, max)
}

// LineAs is Line with lead in place of the request.
func (t Turn) LineAs(lead string, max int) string {
	var b strings.Builder
	b.WriteString(lead)
	if len(t.Tools) > 0 {
		b.WriteString(" Tools: ")
		b.WriteString(FormatTools(t.Tools))
		b.WriteByte('.')
	}
	if len(t.Modified) > 0 {
		b.WriteString(" Modified ")
		b.WriteString(codeList(t.Modified, 6))
		b.WriteByte('.')
	}
	if t.Errors > 0 {
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(t.Errors))
		b.WriteString(" error")
		b.WriteString(plural(t.Errors))
		b.WriteByte('.')
	}
	if t.Outcome != "" {
		b.WriteString(" Assistant: “")
		b.WriteString(Plain(Gist(t.Outcome, max)))
		b.WriteString("”")
	}
	return b.String()
}

func codeList(items []string, max int) string {
	var parts []string
	for i, s := range items {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(items)-max))
			break
		}
		parts = append(parts, Code(s))
	}
	return strings.Join(parts, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
