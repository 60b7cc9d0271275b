package digest

import (
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// Facts is everything the offline strategies take from a summarize request.
type Facts struct {
	Kind string
	// Latest is the last user request of the folded messages; HasRequest
	// is false when they hold none.
	Latest     Request
	HasRequest bool
	Requests   []Request
	Calls      []Call
	Tools      []ToolCount
	// Files merges the host's record with what the messages show.
	Files       abi.FileOps
	Errors      []ErrorNote
	Decisions   []Statement
	Open        []Statement
	Constraints []Statement
	Turns       []Turn
	// Changes says per modified file what changed.
	Changes []FileChange
	// Plan is the agent's latest plan or todo list; HasPlan is false when
	// it kept none.
	Plan    []PlanStep
	HasPlan bool
	// Intention is what the assistant last said it would do next.
	Intention    Statement
	HasIntention bool
	// IntentionRan is true when the calls that carried out the
	// intention have run (see IntentionRan).
	IntentionRan bool
	// Resolved pairs each error with the call that fixed it, if any.
	Resolved []Resolution
	// Decided holds the decisions labelled (taken, ruled out, turned down).
	Decided []Decision
	Images  []ImageNote
	// Findings are what the assistant reported established along the way.
	Findings []Statement
	// Outcomes are what the latest shell commands reported.
	Outcomes []Outcome
	// Matches are the defining lines the newest searches found.
	Matches []Match
	// Refs are what the newest commands named: pull requests, issues,
	// branches, commits.
	Refs []Ref
	// Previous holds the summaries to merge: the request's previous
	// summary, then any summary messages among the folded ones.
	Previous []string
	Focus    []string
	// workCommands caches CommandsFor's reading of the calls: per kind
	// of work looked up, its last command, or "" when none does it.
	workCommands map[string]string
}

// Gather extracts the facts of req.
func Gather(req *abi.SummarizeRequest) *Facts {
	msgs := req.Messages
	f := &Facts{Kind: req.Kind}
	f.Requests = Requests(msgs)
	if n := len(f.Requests); n > 0 {
		f.Latest, f.HasRequest = f.Requests[n-1], true
	}
	// The calls, their error notes and the requests are extracted once
	// and shared by what is derived from them: the turns, the file
	// operations, the constraints.
	f.Calls = Calls(msgs)
	f.Tools = CountTools(f.Calls)
	f.Files = fileOps(f.Calls, req.FileOps)
	f.Errors = errorsOf(msgs, f.Calls)
	f.Decisions, f.Open = assistantStatements(msgs)
	f.Constraints = constraintsOf(f.Requests)
	f.Turns = turnsOf(msgs, f.Requests, f.Calls, f.Errors)
	f.Changes = Changes(f.Calls)
	Said(f.Changes, msgs)
	f.Plan, f.HasPlan = Plan(f.Calls)
	f.Intention, f.HasIntention = Intention(msgs)
	f.IntentionRan = f.HasIntention && IntentionRan(f.Calls, f.Intention)
	f.Resolved = Resolve(f.Calls, f.Errors)
	f.Decided = ClassifyDecisions(f.Decisions, f.Requests)
	f.Images = Images(msgs)
	f.Findings = Findings(msgs, f.Decisions)
	f.Outcomes = Outcomes(f.Calls)
	f.Matches = Matches(f.Calls)
	f.Refs = Refs(f.Calls)
	f.Focus = FocusTerms(req.Focus)
	if s := strings.TrimSpace(req.PreviousSummary); s != "" {
		f.Previous = append(f.Previous, s)
	}
	for _, m := range msgs {
		if t := strings.TrimSpace(m.Text()); t != "" && (m.Summary || m.Role == abi.RoleUser && abi.IsSummaryText(t)) {
			f.Previous = append(f.Previous, t)
		}
	}
	for _, p := range f.Previous {
		f.Files = MergeFileOps(f.Files, abi.FileOps{Modified: PreviousModified(p)})
	}
	return f
}

// PreviousModified finds the files a previous summary lists as modified:
// the backquoted paths on a line that starts with "Modified:" and on the
// list lines under such a line.
func PreviousModified(summary string) []string {
	var out []string
	under := false
	for _, line := range strings.Split(summary, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "Modified:") || strings.HasPrefix(t, "**Files.** Modified:"):
			under = true
			out = append(out, backquoted(t)...)
		case under && (strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ")):
			if p := backquoted(t); len(p) > 0 {
				out = append(out, p[0])
			}
		default:
			under = false
		}
	}
	return out
}

// Backquoted returns the `quoted` spans of s.
func Backquoted(s string) []string { return backquoted(s) }

func backquoted(s string) []string {
	var out []string
	for {
		i := strings.IndexByte(s, '`')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(s[i+1:], '`')
		if j < 0 {
			return out
		}
		if p := s[i+1 : i+1+j]; p != "" {
			out = append(out, p)
		}
		s = s[i+j+2:]
	}
}

// Last returns the last n of list.
func Last[T any](list []T, n int) []T {
	if len(list) > n {
		return list[len(list)-n:]
	}
	return list
}
