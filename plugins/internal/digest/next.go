package digest

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"

	"github.com/compact-host/compact-host/internal/heredoc"
)

// PlanStep is one step of the agent's own plan or todo list.
type PlanStep struct {
	Text   string
	Status string // pending, in_progress, completed (as the agent wrote it)
}

// Plan returns the latest state of the agent's plan: the last TodoWrite
// or update_plan call, or the tasks made with TaskCreate as TaskUpdate
// left them. ok is false when the calls hold no plan.
func Plan(calls []Call) (steps []PlanStep, ok bool) {
	last := -1
	for i := len(calls) - 1; i >= 0; i-- {
		switch calls[i].tool {
		case "todowrite", "update_plan", "todo_write", "update_todos", "update_todo_list":
			last = i
		}
		if last >= 0 {
			break
		}
	}
	var tasks []PlanStep
	for i, c := range calls {
		switch c.tool {
		case "taskcreate":
			if i < last {
				continue
			}
			text := c.Str("subject")
			if text == "" {
				text = c.Str("description")
			}
			if text != "" {
				tasks = append(tasks, PlanStep{Text: text, Status: "pending"})
			}
		case "taskupdate":
			n, err := strconv.Atoi(strings.TrimPrefix(c.Str("taskId"), "#"))
			if err == nil && n >= 1 && n <= len(tasks) && c.Str("status") != "" {
				tasks[n-1].Status = c.Str("status")
			}
		}
	}
	if len(tasks) > 0 {
		return tasks, true
	}
	if last < 0 {
		return nil, false
	}
	var in struct {
		Todos []struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		} `json:"todos"`
		Plan []struct {
			Step   string `json:"step"`
			Status string `json:"status"`
		} `json:"plan"`
	}
	if list := calls[last].Str("todos"); list != "" {
		return checklist(list)
	}
	if json.Unmarshal(calls[last].Raw, &in) != nil {
		return nil, false
	}
	for _, t := range in.Todos {
		steps = append(steps, PlanStep{Text: t.Content, Status: t.Status})
	}
	for _, p := range in.Plan {
		steps = append(steps, PlanStep{Text: p.Step, Status: p.Status})
	}
	return steps, len(steps) > 0
}

// checklist reads a to-do list written as markdown check boxes, one a
// line (Roo Code's update_todo_list): "[x]" done, "[-]" in progress,
// "[ ]" pending.
func checklist(list string) (steps []PlanStep, ok bool) {
	for _, line := range strings.Split(list, "\n") {
		t := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "-*"))
		if len(t) < 4 || t[0] != '[' || t[2] != ']' {
			continue
		}
		status := map[byte]string{'x': "completed", 'X': "completed", '-': "in_progress", '~': "in_progress", ' ': "pending"}[t[1]]
		if status == "" {
			continue
		}
		steps = append(steps, PlanStep{Text: strings.TrimSpace(t[3:]), Status: status})
	}
	return steps, len(steps) > 0
}

// Done reports whether a step's status says it is finished.
func (s PlanStep) Done() bool {
	switch strings.ToLower(s.Status) {
	case "completed", "complete", "done", "cancelled", "canceled", "deleted":
		return true
	}
	return false
}

// Openings of a sentence in which the assistant says what it does next.
var intentOpenings = []string{
	"now ", "next", "then ", "let me ", "let's ", "i'll ", "i will ", "i need to ", "i'm going to ",
	"i am going to ", "we need to ", "going to ", "first, ", "time to ",
}

// Intention returns what the assistant last said it would do: the last
// sentence of its last message with text that announces an action (or
// that ends with a colon, the way an agent introduces a tool call). false
// when that message announces nothing, or when more than two rounds of
// tool results followed it: the work has moved on since.
func Intention(msgs []abi.Message) (Statement, bool) {
	rounds := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != abi.RoleAssistant {
			if rounds++; rounds > 2 {
				return Statement{}, false
			}
			continue
		}
		ss := sentences(m.Text())
		if len(ss) == 0 {
			continue
		}
		for j := len(ss) - 1; j >= 0 && j >= len(ss)-3; j-- {
			s := ss[j]
			lower := strings.ToLower(s)
			for _, o := range intentOpenings {
				if strings.HasPrefix(lower, o) || strings.HasSuffix(s, ":") && j == len(ss)-1 {
					if t, ok := strings.CutSuffix(s, ":"); ok {
						s = t + "."
					}
					return Statement{Index: i, Text: s}, true
				}
			}
		}
		return Statement{}, false
	}
	return Statement{}, false
}

// IntentionRan reports whether what the assistant announced in s has
// been carried out: the message that says it made tool calls, every one
// of them has its result, and the sentence names one step ("Let me commit
// this."), not a sequence ("…, then commit and open the PR"). Such an
// announcement is past, not a next step.
func IntentionRan(calls []Call, s Statement) bool {
	lower := strings.ToLower(s.Text)
	if strings.Contains(lower, "then ") || strings.Contains(lower, " and ") || strings.Contains(lower, " after ") {
		return false
	}
	n := 0
	for _, c := range calls {
		if c.Index != s.Index {
			continue
		}
		if c.Result == nil {
			return false
		}
		n++
	}
	return n > 0
}

// Resolution pairs an error with the later call that shows it fixed.
type Resolution struct {
	ErrorNote
	// FixedBy describes the later call of the same command, or on the
	// same file, that succeeded; "" while the error stands.
	FixedBy string
	// Shell is true for the error of a shell command (a build, a test
	// run), the kind whose failure is work still to do.
	Shell bool
	// Instead describes the later run of another script by the same
	// program that succeeded where a failed script was never run again:
	// the agent went another way; "" otherwise.
	Instead string
}

// Resolve finds, for each error, a later successful call that repeats
// the failed one: the same program and subcommand, or the same tool on
// the same file. What counts is the last such call: a failure after a
// success leaves the error standing.
func Resolve(calls []Call, errs []ErrorNote) []Resolution {
	keys := make([]string, len(calls))
	last := map[string]int{} // key -> the last call of that key with a result
	byResult := map[int]int{}
	for i, c := range calls {
		if c.Command != "" {
			keys[i] = commandKey(mainCommand(c.Command))
		} else {
			keys[i] = c.Name + " " + c.Path()
		}
		if c.Result != nil {
			last[keys[i]] = i
			byResult[c.Result.Index] = i
		}
	}
	out := make([]Resolution, len(errs))
	for i, e := range errs {
		out[i].ErrorNote = e
		ci, ok := byResult[e.Index]
		if !ok {
			continue
		}
		out[i].Shell = calls[ci].Command != "" && !lookup(mainCommand(calls[ci].Command))
		if li := last[keys[ci]]; li > ci {
			r := calls[li].Result
			if !r.IsError && errorExcerpt(r.Text, false) == "" {
				out[i].FixedBy = calls[li].Brief(120)
			}
		} else if out[i].Shell {
			out[i].Instead = anotherScript(calls, keys, ci)
		}
	}
	return out
}

// scriptExts are the files a program runs as a script.
var scriptExts = []string{".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".rb", ".pl", ".php"}

// anotherScript finds, for the failed call ci that ran a script, the
// last later call that ran another script with the same program and
// succeeded: a reproduction or a fix script the agent replaced.
func anotherScript(calls []Call, keys []string, ci int) string {
	script := func(key string) (program string, ok bool) {
		w := strings.Fields(key)
		if len(w) < 2 {
			return "", false
		}
		for _, ext := range scriptExts {
			if strings.HasSuffix(w[len(w)-1], ext) {
				return w[0], true
			}
		}
		return "", false
	}
	program, ok := script(keys[ci])
	if !ok {
		return ""
	}
	for j := len(calls) - 1; j > ci; j-- {
		r := calls[j].Result
		if r == nil || keys[j] == keys[ci] {
			continue
		}
		if p, ok := script(keys[j]); ok && p == program {
			if !r.IsError && errorExcerpt(r.Text, false) == "" {
				return calls[j].Brief(120)
			}
			return ""
		}
	}
	return ""
}

// mainCommand is the first simple command of a command line that does
// more than set up ("cd x && go test ./... | tail" runs go test).
func mainCommand(cmd string) string {
	for seg := range commandSegments(heredoc.Strip(cmd)) {
		seg, _, _ = strings.Cut(seg, "|")
		t := strings.TrimSpace(seg)
		switch w, _, _ := strings.Cut(t, " "); w {
		case "", "cd", "export", "set", "source", ".", "echo", "pushd":
			continue
		}
		return t
	}
	return cmd
}

// commandSegments yields the parts of a command line between "&&", "||",
// ";" and newlines, the empty ones too, reading left to right.
func commandSegments(cmd string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		start := 0
		for i := 0; i < len(cmd); i++ {
			n := 0
			switch c := cmd[i]; {
			case c == ';' || c == '\n':
				n = 1
			case (c == '&' || c == '|') && i+1 < len(cmd) && cmd[i+1] == c:
				n = 2
			}
			if n == 0 {
				continue
			}
			if !yield(cmd[start:i]) {
				return
			}
			i += n - 1
			start = i + 1
		}
		yield(cmd[start:])
	}
}

// lookup reports whether a command only looks for something (a search
// that found nothing fails without anything being broken).
func lookup(cmd string) bool {
	w, _, _ := strings.Cut(strings.TrimSpace(cmd), " ")
	switch w[strings.LastIndexByte(w, '/')+1:] {
	case "grep", "rg", "ag", "find", "fd", "ls", "cat", "head", "tail", "nl", "sed", "awk", "wc", "which", "test", "[", "diff", "stat", "file":
		return true
	}
	return false
}

// Kinds of work a step names and the commands that do them, by the word
// that names both ("Run tests and lint" → `mise run test`, `mise run lint`).
var workWords = []string{"test", "lint", "build", "format", "typecheck", "vet", "commit", "push", "migrate", "install", "deploy"}

// CommandsFor returns, for each kind of work text names, the last shell
// command of the calls that does it (its main command, clipped), at most
// three: a step the agent still has to do, with the commands it ran for
// the same kind of work before, is a step it can resume.
func (f *Facts) CommandsFor(text string) []string {
	lower := strings.ToLower(text)
	var named []string
	for _, w := range workWords {
		if containsWord(lower, w) {
			named = append(named, w)
		}
	}
	f.findWorkCommands(named)
	var out []string
	for _, w := range named {
		if cmd := f.workCommands[w]; cmd != "" && !contains(out, cmd) {
			if out = append(out, cmd); len(out) == 3 {
				break
			}
		}
	}
	return out
}

// findWorkCommands looks up, for the kinds of work not looked up yet, the
// last shell command that does each, in one pass from the newest call;
// a kind no command does is remembered as "".
func (f *Facts) findWorkCommands(kinds []string) {
	if f.workCommands == nil {
		f.workCommands = map[string]string{}
	}
	var want []string
	for _, w := range kinds {
		if _, done := f.workCommands[w]; !done {
			want = append(want, w)
			f.workCommands[w] = ""
		}
	}
	left := len(want)
	for i := len(f.Calls) - 1; i >= max(0, len(f.Calls)-workScan) && left > 0; i-- {
		c := &f.Calls[i]
		if !c.IsShell() || !anyWord(c.Command, want) {
			continue // the usual call: no word wanted, no command parsed
		}
		main := mainCommand(c.Command)
		if lookup(main) {
			continue
		}
		lower := strings.ToLower(main)
		for _, w := range want {
			if f.workCommands[w] == "" && containsWord(lower, w) {
				f.workCommands[w] = ClipHead(OneLine(main), 80)
				left--
			}
		}
	}
}

// workScan bounds the calls findWorkCommands reads, newest first.
const workScan = 2000

// anyWord reports whether cmd holds one of words, in any case, the way
// containsWord finds them.
func anyWord(cmd string, words []string) bool {
	var l lowerer
	lower := l.lower(cmd)
	for _, w := range words {
		if containsWord(lower, w) {
			return true
		}
	}
	return false
}

// containsWord reports whether lower holds w as a word or with a suffix
// of its forms ("tests", "linting", "go test ./...", "test:unit"), not
// inside another word ("testbed", "checkout", "pytest").
func containsWord(lower, w string) bool {
	for i := 0; i+len(w) <= len(lower); {
		j := strings.Index(lower[i:], w)
		if j < 0 {
			return false
		}
		k := i + j
		if k == 0 || !isWordByte(lower[k-1]) {
			rest := lower[k+len(w):]
			for _, suffix := range []string{"", "s", "ing", "ed", "er", "ers"} {
				if strings.HasPrefix(rest, suffix) && (len(rest) == len(suffix) || !isWordByte(rest[len(suffix)])) {
					return true
				}
			}
		}
		i = k + 1
	}
	return false
}
