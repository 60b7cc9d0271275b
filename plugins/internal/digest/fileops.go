package digest

import (
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/internal/heredoc"
)

// FileOps returns the files msgs show being read and modified, merged after
// known (the host's cumulative record, which comes first and wins). A file
// both read and modified is listed as modified only. Order is first
// appearance.
func FileOps(msgs []abi.Message, known abi.FileOps) abi.FileOps {
	return fileOps(Calls(msgs), known)
}

// fileOps is FileOps with the calls of the messages already paired.
func fileOps(calls []Call, known abi.FileOps) abi.FileOps {
	var s opSet
	for _, p := range known.Modified {
		s.modify(p)
	}
	for _, p := range known.Read {
		s.read(p)
	}
	openFile := ""
	for _, c := range calls {
		callOps(c, &s, &openFile)
	}
	return s.ops()
}

// MergeFileOps unions a and b, keeping a's order first.
func MergeFileOps(a, b abi.FileOps) abi.FileOps {
	var s opSet
	for _, ops := range []abi.FileOps{a, b} {
		for _, p := range ops.Modified {
			s.modify(p)
		}
	}
	for _, ops := range []abi.FileOps{a, b} {
		for _, p := range ops.Read {
			s.read(p)
		}
	}
	return s.ops()
}

// CallModifies returns the files one call modifies, as far as its input shows.
func CallModifies(c Call) []string {
	var s opSet
	open := ""
	callOps(c, &s, &open)
	return s.modified
}

type opSet struct {
	reads, modified []string
	seen            map[string]bool // true: modified
}

func (s *opSet) modify(p string) {
	p = cleanPath(p)
	if p == "" {
		return
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	if mod, ok := s.seen[p]; ok && mod {
		return
	}
	s.seen[p] = true
	s.modified = append(s.modified, p)
}

func (s *opSet) read(p string) {
	p = cleanPath(p)
	if p == "" {
		return
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	if _, ok := s.seen[p]; ok {
		return
	}
	s.seen[p] = false
	s.reads = append(s.reads, p)
}

func (s *opSet) ops() abi.FileOps {
	var out abi.FileOps
	for _, p := range s.reads {
		if !s.seen[p] {
			out.Read = append(out.Read, p)
		}
	}
	out.Modified = append(out.Modified, s.modified...)
	return out
}

func cleanPath(p string) string {
	p = strings.TrimSpace(p)
	p = strings.Trim(p, "`'\"")
	return p
}

// callOps records what one call did to files. openFile carries SWE-agent's
// notion of the open file from one call to the next.
func callOps(c Call, s *opSet, openFile *string) {
	name := c.tool
	if patch := patchText(c); patch != "" {
		for _, p := range PatchFiles(patch) {
			s.modify(p)
		}
		return
	}
	if path := c.Path(); path != "" {
		switch {
		case name == "str_replace_editor" || name == "str_replace_based_edit_tool":
			if c.Str("command") == "view" {
				s.read(path)
			} else {
				s.modify(path)
			}
		case isModifyTool(name):
			s.modify(path)
		case isReadTool(name):
			s.read(path)
		}
		return
	}
	if c.Command != "" {
		shellOps(c.Command, s, openFile)
	}
}

func isModifyTool(name string) bool {
	for _, w := range []string{"edit", "write", "create", "patch", "replace", "insert", "delete", "notebook"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

func isReadTool(name string) bool {
	for _, w := range []string{"read", "view", "open", "cat"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// patchText returns the patch a call applies, in the apply_patch format
// ("*** Begin Patch"), whether it is the raw input, an input field or a
// shell here-document.
func patchText(c Call) string {
	for _, s := range []string{c.RawInput, c.Str("input"), c.Str("patch"), c.Command} {
		if strings.Contains(s, "*** Begin Patch") {
			return s
		}
	}
	return ""
}

// PatchFiles lists the files an apply_patch patch adds, updates, deletes or
// moves to.
func PatchFiles(patch string) []string {
	var out []string
	for _, line := range strings.Split(patch, "\n") {
		line = strings.TrimRight(line, "\r")
		for _, p := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "} {
			if rest, ok := strings.CutPrefix(line, p); ok {
				out = append(out, strings.TrimSpace(rest))
			}
		}
	}
	return out
}

// shellOps recognises the commands that plainly write a file (redirections,
// tee, touch, sed -i and perl -i, rm), those that plainly show one (cat,
// head, tail, nl, less, more, bat, sed -n), and the file commands of
// SWE-agent's interface (open, create, edit).
func shellOps(cmd string, s *opSet, openFile *string) {
	cmd = heredoc.Strip(cmd)
	var first [2]string
	n := 0
	for w := range strings.FieldsSeq(cmd) {
		first[n] = w
		if n++; n == len(first) {
			break
		}
	}
	if n == 2 {
		switch first[0] {
		case "open":
			*openFile = first[1]
			s.read(first[1])
			return
		case "create":
			*openFile = first[1]
			s.modify(first[1])
			return
		}
	}
	if n >= 1 && first[0] == "edit" && *openFile != "" {
		s.modify(*openFile)
		return
	}
	var buf [16]string
	words := buf[:0] // one buffer for the words of every simple command
	for simple := range strings.FieldsFuncSeq(unquote(cmd), simpleSeparator) {
		words = words[:0]
		for w := range strings.FieldsSeq(simple) {
			words = append(words, w)
		}
		for i := 0; i < len(words); i++ {
			w := words[i]
			target := ""
			switch {
			case w == ">" || w == ">>" || w == "1>" || w == "1>>":
				if i+1 < len(words) {
					target = words[i+1]
				}
			case strings.HasPrefix(w, ">") && !strings.HasPrefix(w, ">&"):
				target = strings.TrimLeft(w, ">")
			}
			if target != "" && pathLike(target) {
				s.modify(target)
			}
		}
		if len(words) == 0 {
			continue
		}
		prog := words[0]
		if j := strings.LastIndexByte(prog, '/'); j >= 0 {
			prog = prog[j+1:]
		}
		switch prog {
		case "cat", "head", "tail", "nl", "less", "more", "bat":
			for _, w := range words[1:] {
				if w == ">" || w == ">>" || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") {
					break
				}
				if !strings.HasPrefix(w, "-") && pathLike(w) {
					s.read(w)
				}
			}
		case "rm":
			for _, w := range words[1:] {
				if !strings.HasPrefix(w, "-") && pathLike(w) {
					s.modify(w)
				}
			}
		case "tee", "touch":
			for _, w := range words[1:] {
				if !strings.HasPrefix(w, "-") && pathLike(w) {
					s.modify(w)
				}
			}
		case "sed", "perl":
			inPlace := false
			for _, w := range words[1:] {
				if strings.HasPrefix(w, "-i") || (words[0] == "perl" && strings.HasPrefix(w, "-p") && strings.Contains(w, "i")) {
					inPlace = true
				}
			}
			for _, w := range words[1:] {
				if strings.HasPrefix(w, "-") || w == quoted || !pathLike(w) {
					continue
				}
				if inPlace {
					s.modify(w)
				} else if prog == "sed" {
					s.read(w)
				}
			}
		}
	}
}

// quoted stands for a quoted string once unquote has removed it.
const quoted = "\x00q"

// unquote replaces every quoted string of a shell command by the word
// quoted, so that operators inside quotes are not read as operators.
func unquote(cmd string) string {
	if !strings.ContainsAny(cmd, `'"`) {
		return cmd
	}
	var b strings.Builder
	b.Grow(len(cmd) + 8)
	for i := 0; i < len(cmd); i++ {
		ch := cmd[i]
		if ch == '\'' || ch == '"' {
			j := strings.IndexByte(cmd[i+1:], ch)
			if j < 0 {
				break
			}
			b.WriteString(" " + quoted + " ")
			i += j + 1
			continue
		}
		b.WriteByte(ch)
	}
	return b.String()
}

// simpleSeparator splits a command line into simple commands at ; & | and newlines.
func simpleSeparator(r rune) bool {
	return r == ';' || r == '&' || r == '|' || r == '\n' || r == '(' || r == ')'
}

// pathLike reports whether w looks like a file a command writes: not a
// device, a descriptor, a variable or a number.
func pathLike(w string) bool {
	w = strings.Trim(w, `'"`)
	if w == "" || w == quoted || strings.HasPrefix(w, "/dev/") || strings.HasPrefix(w, "&") || strings.HasPrefix(w, "$") || strings.HasPrefix(w, "-") {
		return false
	}
	if !strings.ContainsAny(w, "./") || strings.ContainsAny(w, "<>*?{}`=\x00") {
		return false
	}
	// A number is not a path. Only a word opening as a number can be one
	// (with "./" in it, not Inf or NaN), and ParseFloat's error for any
	// other word was an allocation.
	if c := w[0]; c == '.' || c == '+' || c >= '0' && c <= '9' {
		if _, err := strconv.ParseFloat(w, 64); err == nil {
			return false
		}
	}
	return true
}
