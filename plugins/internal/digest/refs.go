package digest

import (
	"regexp"
	"strings"

	"github.com/compact-host/compact-host/internal/heredoc"
)

// Ref is something the commands named that later work refers to by its
// name: a pull request, an issue, a branch, a commit.
type Ref struct {
	// Kind is "PR", "issue", "branch" or "commit".
	Kind string
	// Name is how it is referred to: "#172", "av-raf", a branch name, a
	// short hash.
	Name string
	// Detail is what else the command said of it: a URL, a commit's
	// branch and subject.
	Detail string
}

// String is the ref as a summary writes it.
func (r Ref) String() string {
	s := r.Kind + " " + Code(r.Name)
	if r.Kind == "PR" || r.Kind == "issue" && strings.HasPrefix(r.Name, "#") {
		s = r.Kind + " " + r.Name
	}
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	return s
}

const (
	// refScan is how many of the newest calls Refs reads.
	refScan = 300
	// RefsKept is how many refs Refs returns at most.
	RefsKept = 12
	// refOutput is how much of a command's output is read at its head
	// and at its tail: names are printed there, not in the middle of a
	// long log.
	refOutput = 4096
)

var (
	// A pull request or issue of a forge, by URL (GitHub, GitLab,
	// Gitea-likes): .../pull/172, .../pulls/172, .../merge_requests/7,
	// .../issues/12. A new-PR link names a branch.
	forgeRef = regexp.MustCompile(`[\w.-]+/[\w.-]+/(pulls?|merge_requests|issues)/(\d+|new/[\w./-]+)`)
	// git commit's first line: "[branch 1a2b3c4] subject".
	commitLine = regexp.MustCompile(`(?m)^\[([^\s\]]+)(?: \(root-commit\))? ([0-9a-f]{7,40})\] (.+)$`)
	// git push's line per ref: "   9e64962e..97ce79e9  b -> b" or
	// " * [new branch]      b -> b".
	pushLine = regexp.MustCompile(`(?m)^\s*(?:\+?\s*([0-9a-f]{7,40})\.\.\.?([0-9a-f]{7,40})|\* \[new branch\])\s+(\S+) -> (\S+)`)
	// An issue tracker's confirmation: "Created issue: av-raf — title".
	trackerLine = regexp.MustCompile(`(?mi)\b(?:created|updated|closed|opened) (issue|task|epic|ticket|bug)[: ]+([A-Za-z][\w.-]*-[\w.]+)`)
)

// Refs lists what the newest commands named, oldest first: pull requests
// and issues opened, viewed or commented on, branches created or pushed,
// commits made, tracker items created or updated. Each is named once, at
// its latest mention.
func Refs(calls []Call) []Ref {
	var out []Ref
	seen := map[string]bool{}
	add := func(r Ref) {
		key := r.Kind + " " + r.Name
		if seen[key] || len(out) >= RefsKept {
			return
		}
		seen[key] = true
		out = append(out, r)
	}
	for i := len(calls) - 1; i >= max(0, len(calls)-refScan) && len(out) < RefsKept; i-- {
		c := &calls[i]
		if !c.IsShell() || c.Result == nil || c.Result.IsError {
			continue
		}
		output := c.Result.Text
		if len(output) > 2*refOutput {
			output = cutRunes(output, refOutput) + "\n" + tailRunes(output, refOutput)
		}
		for _, r := range outputRefs(output) {
			add(r)
		}
		for _, r := range commandRefs(heredoc.Strip(c.Command)) {
			add(r)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// outputRefs reads the names a command printed.
func outputRefs(output string) []Ref {
	var out []Ref
	if strings.Contains(output, "/") {
		for _, m := range forgeRef.FindAllStringSubmatchIndex(output, 4) {
			kind, name := output[m[2]:m[3]], output[m[4]:m[5]]
			url := urlAround(output, m[0], m[1])
			switch {
			case strings.HasPrefix(name, "new/"):
				out = append(out, Ref{Kind: "branch", Name: strings.TrimPrefix(name, "new/"), Detail: "a pull request can be opened at " + url})
			case kind == "issues":
				out = append(out, Ref{Kind: "issue", Name: "#" + name, Detail: url})
			default:
				out = append(out, Ref{Kind: "PR", Name: "#" + name, Detail: url})
			}
		}
	}
	if strings.Contains(output, "] ") {
		for _, m := range commitLine.FindAllStringSubmatch(output, 2) {
			out = append(out, Ref{Kind: "commit", Name: m[2], Detail: "on " + Code(m[1]) + ", “" + ClipHead(m[3], 120) + "”"})
		}
	}
	if strings.Contains(output, " -> ") {
		for _, m := range pushLine.FindAllStringSubmatch(output, 4) {
			if m[2] != "" {
				out = append(out, Ref{Kind: "commit", Name: m[2], Detail: "pushed to " + Code(m[4])})
			} else {
				out = append(out, Ref{Kind: "branch", Name: m[3], Detail: "new, " + Code(m[3]) + " -> " + Code(m[4])})
			}
		}
	}
	for _, m := range trackerLine.FindAllStringSubmatchIndex(output, 2) {
		line := output[m[0]:]
		line, _, _ = strings.Cut(line, "\n")
		out = append(out, Ref{Kind: "issue", Name: output[m[4]:m[5]], Detail: "“" + ClipHead(strings.TrimSpace(line), 160) + "”"})
	}
	return out
}

// commandRefs reads the names a command line gives: gh pr/issue numbers,
// forge API paths, branches it creates or pushes.
func commandRefs(cmd string) []Ref {
	var out []Ref
	for seg := range commandSegments(cmd) {
		seg, _, _ = strings.Cut(seg, "|")
		words := strings.Fields(seg)
		for len(words) > 0 && strings.Contains(words[0], "=") {
			words = words[1:] // VAR=value prefixes
		}
		if len(words) < 3 {
			continue
		}
		switch {
		case words[0] == "gh" && (words[1] == "pr" || words[1] == "issue"):
			kind := map[string]string{"pr": "PR", "issue": "issue"}[words[1]]
			for _, w := range words[2:] {
				if n := strings.TrimPrefix(w, "#"); n != "" && isDigits(n) {
					out = append(out, Ref{Kind: kind, Name: "#" + n})
					break
				}
			}
		case words[0] == "git":
			out = append(out, gitBranchRefs(words[1:])...)
		}
		if strings.Contains(seg, "/pulls/") || strings.Contains(seg, "/issues/") || strings.Contains(seg, "/pull/") {
			for _, m := range forgeRef.FindAllStringSubmatch(seg, 2) {
				if isDigits(m[2]) {
					kind := "PR"
					if m[1] == "issues" {
						kind = "issue"
					}
					out = append(out, Ref{Kind: kind, Name: "#" + m[2]})
				}
			}
		}
	}
	return out
}

// gitBranchRefs reads the branch a git command creates, switches to or
// pushes (args after "git", options before the subcommand skipped).
func gitBranchRefs(args []string) []Ref {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if args[0] == "-C" || args[0] == "-c" {
			args = args[min(2, len(args)):]
			continue
		}
		args = args[1:]
	}
	if len(args) < 2 {
		return nil
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "checkout", "switch", "worktree":
		create := map[string]string{"checkout": "-b", "switch": "-c", "worktree": "-b"}[sub]
		for i, w := range rest {
			if (w == create || w == strings.ToUpper(create)) && i+1 < len(rest) {
				return []Ref{{Kind: "branch", Name: strings.Trim(rest[i+1], `"'`), Detail: "created"}}
			}
		}
	case "push":
		var pos []string
		for _, w := range rest {
			if !strings.HasPrefix(w, "-") && !strings.ContainsAny(w, "|&;>") {
				pos = append(pos, strings.Trim(w, `"'`))
			}
		}
		if len(pos) >= 2 && pos[1] != "HEAD" {
			name, _, _ := strings.Cut(strings.TrimPrefix(pos[1], "HEAD:"), ":")
			if name != "" {
				return []Ref{{Kind: "branch", Name: name, Detail: "pushed to " + Code(pos[0])}}
			}
		}
	}
	return nil
}

// urlAround widens a match to the URL that holds it.
func urlAround(s string, from, to int) string {
	for from > 0 && !strings.ContainsRune(" \t\n\"'(<`", rune(s[from-1])) {
		from--
	}
	for to < len(s) && !strings.ContainsRune(" \t\n\"')>`", rune(s[to])) {
		to++
	}
	return strings.TrimRight(s[from:to], ".,;:")
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
