package digest

import (
	"encoding/json"
	"strings"
)

// Outcome is what a shell command reported: the lines of its output that
// state a result (test counts, pass and fail verdicts, a build's status,
// what a reproduction script printed as its conclusion), verbatim.
type Outcome struct {
	// Index is the position of the message holding the result.
	Index int
	// Call describes the command (see Call.Brief).
	Call string
	// Lines are the result lines, at most three, in output order.
	Lines []string
}

// Limits of the outcome scan. Result lines sit at the end of an output
// (a test runner's totals) or near its start (a script's verdict), so a
// long output is read at both ends only: a 10 MB log costs no more than a
// short one.
const (
	outcomeHead  = 1536
	outcomeTail  = 4096
	outcomeLines = 3
	outcomeCalls = 24
	// outcomeScan bounds the calls looked at, newest first: a session
	// that repeats a few commands would otherwise be read whole.
	outcomeScan = 200
	// OutcomesKept is how many outcomes Outcomes returns at most.
	OutcomesKept = 10
)

// Outcomes returns what the latest shell commands reported, oldest first:
// for each command (the same program and subcommand counts as one, so a
// repeated test run gives its last result only), the result lines of its
// last run. Lookups (grep, cat, ls…) and commands whose output states no
// result are left out; of the newest outcomeScan calls, at most
// outcomeCalls commands are read and OutcomesKept outcomes returned.
func Outcomes(calls []Call) []Outcome {
	var sessions map[string]int // built at the first poll: most sessions have none
	var out []Outcome
	seen := map[string]bool{}
	for i := len(calls) - 1; i >= max(0, len(calls)-outcomeScan) && len(seen) < outcomeCalls && len(out) < OutcomesKept; i-- {
		c := &calls[i]
		if c.Result == nil {
			continue
		}
		// A poll of a running command (Codex's write_stdin) is more of
		// that command's output: it stands for the command, and an
		// earlier chunk of the same run still counts when it shows no
		// result.
		run, poll := c, false
		if c.tool == "write_stdin" {
			if sessions == nil {
				sessions = shellSessions(calls)
			}
			origin, ok := sessions[sessionOf(c)]
			if !ok {
				continue
			}
			run, poll = &calls[origin], true
		}
		if !run.IsShell() {
			continue
		}
		main := mainCommand(run.Command)
		if lookup(main) || readsHistory(main) {
			continue
		}
		key := commandKey(main)
		if seen[key] {
			continue
		}
		lines := resultLines(c.Result.Text)
		if poll && len(lines) == 0 {
			continue
		}
		seen[key] = true
		if len(lines) > 0 {
			out = append(out, Outcome{Index: c.Result.Index, Call: run.Brief(120), Lines: lines})
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// readsHistory reports whether a command shows a repository's history or
// changes (git diff, show, log), output whose lines are content, not results.
func readsHistory(main string) bool {
	w := strings.Fields(main)
	if len(w) < 2 || w[0] != "git" {
		return false
	}
	for _, a := range w[1:] {
		if strings.HasPrefix(a, "-") {
			continue // git -C dir diff: the options before the subcommand
		}
		switch a {
		case "diff", "show", "log", "blame":
			return true
		}
	}
	return false
}

// shellSessions maps the session IDs of commands still running when their
// call returned ("Process running with session ID 80268", which Codex
// writes in the first lines of the result) to the index of their call.
func shellSessions(calls []Call) map[string]int {
	const marker = "session ID "
	out := map[string]int{}
	for i, c := range calls {
		if c.Result == nil || !c.IsShell() {
			continue
		}
		head := cutRunes(c.Result.Text, 1024)
		if j := strings.LastIndex(head, marker); j >= 0 {
			rest := head[j+len(marker):]
			n := 0
			for n < len(rest) && isDigit(rest[n]) {
				n++
			}
			if n > 0 {
				out[rest[:n]] = i
			}
		}
	}
	return out
}

// sessionOf is the session a poll of a running command reads.
func sessionOf(c *Call) string {
	var in struct {
		SessionID json.Number `json:"session_id"`
	}
	if json.Unmarshal(c.Raw, &in) != nil {
		return ""
	}
	return in.SessionID.String()
}

// commandKey is the program and subcommand of a simple command, the key
// under which runs of the same command replace each other ("go test" of
// two packages is one command; "python a.py" and "python b.py" are two,
// and so are "python -m pytest" and "python -m django").
func commandKey(main string) string {
	w := strings.Fields(main)
	n := min(len(w), 2)
	if n == 2 && strings.HasPrefix(w[1], "-") && len(w) > 2 {
		n = 3
	}
	return strings.Join(w[:n], " ")
}

// resultLines picks the lines of output that state a result, from its
// head and tail: verdicts ("RESULT: ERROR", "** BUILD SUCCEEDED **")
// first, then tallies, at most outcomeLines in all.
func resultLines(output string) []string {
	text := output
	if len(text) > outcomeHead+outcomeTail {
		text = cutRunes(text, outcomeHead) + "\n" + tailRunes(text, outcomeTail)
	}
	var verdicts, tallies []string
	var scratch lowerer
	for line := range strings.SplitSeq(text, "\n") {
		t := strings.TrimSpace(line)
		if len(t) < 4 || len(t) > 300 {
			continue
		}
		switch l := scratch.lower(t); {
		case isVerdict(l):
			verdicts = appendUnique(verdicts, ClipHead(t, 200))
		case isTally(l):
			tallies = appendUnique(tallies, ClipHead(t, 200))
		}
	}
	verdicts = Last(verdicts, outcomeLines)
	return append(verdicts, Last(tallies, outcomeLines-len(verdicts))...)
}

var (
	// Openings of a line that states a verdict. One that ends with a
	// colon needs more after it ("tests:" alone is a YAML key).
	verdictOpenings = []string{
		"success", "result:", "result ", "results:", "ok ", "ok\t", "pass ", "pass:", "passed", "fail ", "fail:", "failed", "ran ",
		"tests:", "test result", "test suites:", "total tests", "tests run", "** build", "** test", "build succeeded", "build failed",
		"build successful", "actual", "all tests", "all checks", "done in", "finished in", "collected ",
	}
	// What a line states a verdict with wherever it says it.
	verdictWords = []string{"no module named", "command not found"}
	// Words that, after a count, make a line a tally ("15 pass", "2 failed").
	tallyWords = []string{"pass", "passed", "passing", "fail", "failed", "failing", "failures", "tests", "test", "errors", "skipped", "warnings"}
)

// isVerdict reports whether lower, a line in lower case, states a verdict.
func isVerdict(lower string) bool {
	for _, o := range verdictOpenings {
		if strings.HasPrefix(lower, o) && (!strings.HasSuffix(o, ":") || len(strings.TrimSpace(lower[len(o):])) > 0) {
			return true
		}
	}
	for _, w := range verdictWords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// isTally reports whether lower, a line in lower case, holds a count of
// passes, failures or tests ("15 pass", "=== 2 failed, 40 passed ===").
func isTally(lower string) bool {
	for i := 0; i < len(lower); i++ {
		if !isDigit(lower[i]) || i > 0 && (isDigit(lower[i-1]) || isWordByte(lower[i-1])) {
			continue
		}
		j := i
		for j < len(lower) && isDigit(lower[j]) {
			j++
		}
		if j >= len(lower) || lower[j] != ' ' {
			continue
		}
		rest := lower[j+1:]
		for _, w := range tallyWords {
			if strings.HasPrefix(rest, w) && (len(rest) == len(w) || !isWordByte(rest[len(w)])) {
				return true
			}
		}
	}
	return false
}
