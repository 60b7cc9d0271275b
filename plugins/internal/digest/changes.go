package digest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/internal/heredoc"
)

// FileChange is what the folded messages did to one file.
type FileChange struct {
	Path             string
	Created, Deleted bool
	// Edits counts the calls that changed the file.
	Edits int
	// Added, Changed and Removed are the definitions (functions, types,
	// classes, methods, top-level constants) the edits added, rewrote or
	// took out, as far as their text shows.
	Added, Changed, Removed []string
	// Touched are identifiers an edit introduced when it defined nothing.
	Touched []string
	// Last is the latest change in brief: its first changed line before
	// and after, or how the file was written.
	Last string
	// Said is what the agent said the latest change does: the edit
	// call's own instruction or description, else what the message that
	// made it announced (see Said).
	Said string
	// by is the call that made the latest change.
	by *Call
}

// Changes lists per modified file what the calls did to it, in the order
// the files were first changed.
func Changes(calls []Call) []FileChange {
	var out []*FileChange
	byPath := map[string]*FileChange{}
	seen := map[string]bool{} // read or changed before
	var cur *Call
	get := func(p string) *FileChange {
		p = cleanPath(p)
		c := byPath[p]
		if c == nil {
			c = &FileChange{Path: p}
			byPath[p] = c
			out = append(out, c)
		}
		c.by = cur
		return c
	}
	openFile := ""
	for i := range calls {
		c := calls[i]
		cur = &calls[i]
		if c.Result != nil && c.Result.IsError {
			continue // a failed edit changed nothing
		}
		name := c.tool
		if patch := patchText(c); patch != "" {
			for _, h := range patchHunks(patch) {
				fc := get(h.path)
				fc.Edits++
				switch h.op {
				case "add":
					fc.Created, fc.Deleted = true, false
					fc.diff("", h.plus)
					fc.Last = fmt.Sprintf("created with %d lines", strings.Count(h.plus, "\n")+1)
				case "delete":
					fc.Deleted = true
					fc.Last = "deleted"
				default:
					fc.diff(h.minus, h.plus)
					fc.Last = brief(h.minus, h.plus)
				}
				if h.moveTo != "" {
					fc.Last += "; moved to " + Code(h.moveTo)
					get(h.moveTo).Created = true
				}
				seen[fc.Path] = true
			}
			continue
		}
		path := c.Path()
		switch {
		case path != "" && (name == "str_replace_editor" || name == "str_replace_based_edit_tool"):
			switch c.Str("command") {
			case "create":
				writeChange(get(path), c.Str("file_text"), !seen[cleanPath(path)])
			case "str_replace":
				fc := get(path)
				fc.Edits++
				fc.diff(c.Str("old_str"), c.Str("new_str"))
				fc.Last = brief(c.Str("old_str"), c.Str("new_str"))
			case "insert":
				fc := get(path)
				fc.Edits++
				fc.diff("", c.Str("new_str"))
				fc.Last = brief("", c.Str("new_str"))
			}
		case path != "" && (strings.Contains(name, "multiedit") || strings.Contains(name, "multi_edit")):
			var in struct {
				Edits []struct {
					Old string `json:"old_string"`
					New string `json:"new_string"`
				} `json:"edits"`
			}
			if json.Unmarshal(c.Raw, &in) == nil {
				fc := get(path)
				for _, e := range in.Edits {
					fc.Edits++
					fc.diff(e.Old, e.New)
					fc.Last = brief(e.Old, e.New)
				}
			}
		case path != "" && (c.Str("old_string") != "" || c.Str("new_string") != "" || c.Str("old_str") != "" || c.Str("new_str") != ""):
			fc := get(path)
			fc.Edits++
			old, nw := c.Str("old_string")+c.Str("old_str"), c.Str("new_string")+c.Str("new_str")
			fc.diff(old, nw)
			fc.Last = brief(old, nw)
		case path != "" && isModifyTool(name):
			content := c.Str("content") + c.Str("file_text") + c.Str("contents") + c.Str("text")
			writeChange(get(path), content, !seen[cleanPath(path)])
		case path != "" && isReadTool(name):
			// Reading makes a later write a rewrite, not a creation.
		case c.Command != "":
			shellChanges(c.Command, get, &openFile)
		}
		if path != "" {
			seen[cleanPath(path)] = true
		}
	}
	res := make([]FileChange, len(out))
	for i, c := range out {
		res[i] = *c
	}
	return res
}

func writeChange(fc *FileChange, content string, created bool) {
	fc.Edits++
	if created && fc.Edits == 1 {
		fc.Created = true
	}
	fc.Deleted = false
	defs := Definitions(content)
	if fc.Created {
		fc.Added = appendNames(fc.Added, defs...)
	} else {
		fc.Changed = appendNames(fc.Changed, defs...)
	}
	verb := "rewritten whole"
	if fc.Created {
		verb = "created"
	}
	fc.Last = fmt.Sprintf("%s, %d lines", verb, strings.Count(strings.TrimRight(content, "\n"), "\n")+1)
}

// shellChanges records the deletions and in-place edits a shell command
// makes plain.
func shellChanges(cmd string, get func(string) *FileChange, openFile *string) {
	var s opSet
	shellOps(cmd, &s, openFile)
	if len(s.modified) == 0 {
		return
	}
	words := strings.Fields(heredoc.Strip(cmd))
	verb := "changed by " + Code(ClipHead(OneLine(cmd), 120))
	if len(words) > 0 && words[0] == "rm" {
		for _, p := range s.modified {
			fc := get(p)
			fc.Deleted = true
			fc.Last = "deleted"
		}
		return
	}
	for _, p := range s.modified {
		fc := get(p)
		fc.Edits++
		fc.Last = verb
	}
}

func (fc *FileChange) diff(old, nw string) {
	before, after := Definitions(old), Definitions(nw)
	for _, d := range after {
		if contains(before, d) {
			if !contains(fc.Added, d) {
				fc.Changed = appendNames(fc.Changed, d)
			}
		} else {
			fc.Added = appendNames(fc.Added, d)
		}
	}
	for _, d := range before {
		if !contains(after, d) {
			fc.Removed = appendNames(fc.Removed, d)
		}
	}
	if len(before) == 0 && len(after) == 0 {
		old := identifiers(old)
		for _, id := range identifiers(nw) {
			if !contains(old, id) && len(fc.Touched) < 8 {
				fc.Touched = appendNames(fc.Touched, id)
			}
		}
	}
}

// brief describes an edit by its first line that differs, before and after.
func brief(old, nw string) string {
	ol, nl := strings.Split(old, "\n"), strings.Split(nw, "\n")
	for i := 0; i < len(ol) || i < len(nl); i++ {
		var a, b string
		if i < len(ol) {
			a = strings.TrimSpace(ol[i])
		}
		if i < len(nl) {
			b = strings.TrimSpace(nl[i])
		}
		if a == b {
			continue
		}
		switch {
		case a == "":
			return "added " + Code(ClipHead(b, 120))
		case b == "":
			return "removed " + Code(ClipHead(a, 120))
		}
		return Code(ClipHead(a, 100)) + " → " + Code(ClipHead(b, 100))
	}
	return ""
}

func appendNames(list []string, names ...string) []string {
	for _, n := range names {
		if n != "" && !contains(list, n) && len(list) < 12 {
			list = append(list, n)
		}
	}
	return list
}

// Words that introduce a definition in the languages agents most edit.
var defKeywords = map[string]bool{
	"func": true, "def": true, "class": true, "type": true, "interface": true, "struct": true,
	"enum": true, "protocol": true, "trait": true, "fn": true, "function": true, "extension": true,
	"impl": true, "const": true, "module": true,
}

// Modifiers that may come before such a word.
var defModifiers = map[string]bool{
	"export": true, "default": true, "pub": true, "pub(crate)": true, "async": true, "static": true,
	"public": true, "private": true, "protected": true, "internal": true, "fileprivate": true,
	"override": true, "final": true, "abstract": true, "open": true, "declare": true, "mutating": true,
	"unsafe": true, "inline": true, "@objc": true, "@MainActor": true, "data": true, "sealed": true,
}

// Definitions lists the names a piece of code defines, line by line: a
// definition keyword after optional modifiers, then a name. Constants
// count only unindented, where they are top-level.
func Definitions(code string) []string {
	var out []string
	for _, line := range strings.Split(code, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "//") || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "*") {
			continue
		}
		words := strings.Fields(t)
		k := 0
		for k < len(words) && defModifiers[words[k]] {
			k++
		}
		if k >= len(words)-1 || !defKeywords[words[k]] {
			continue
		}
		kw, rest := words[k], strings.Join(words[k+1:], " ")
		if kw == "const" && line != t {
			continue
		}
		if kw == "func" && strings.HasPrefix(rest, "(") {
			// A Go method: the receiver's type names it.
			end := strings.IndexByte(rest, ')')
			if end < 0 {
				continue
			}
			recv := strings.Fields(strings.Trim(rest[:end+1], "()"))
			rest = strings.TrimSpace(rest[end+1:])
			if name := ident(rest); name != "" && len(recv) > 0 {
				out = appendNew(out, strings.TrimLeft(recv[len(recv)-1], "*")+"."+name)
			}
			continue
		}
		if name := ident(rest); len(name) > 1 {
			out = appendNew(out, name)
		}
	}
	return out
}

// ident returns the identifier s starts with.
func ident(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			i++
			continue
		}
		break
	}
	return s[:i]
}

// identifiers lists the code-like words of s: those with a capital after
// the first letter, an underscore or a dot between letters, four bytes or
// more.
func identifiers(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(s, func(r rune) bool {
		return !(r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		w = strings.Trim(w, ".")
		if len(w) < 4 || len(w) > 60 {
			continue
		}
		if strings.ContainsAny(w[1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") || strings.Contains(w, ".") && !strings.HasSuffix(w, ".") {
			out = appendNew(out, w)
		}
	}
	return out
}

// Line describes the change on one line.
func (fc FileChange) Line() string { return fc.line(8, true) }

// Brief is Line without the latest change and with at most three names
// per kind: what a summary short of room keeps of a changed file.
func (fc FileChange) Brief() string { return fc.line(3, false) }

// ByShell reports whether the latest change was made by a shell command
// rather than an edit call.
func (fc FileChange) ByShell() bool { return strings.HasPrefix(fc.Last, "changed by ") }

// Said fills in what the agent said each change does: the edit call's
// instruction or description, else the last sentence of the message that
// made it announcing what it does ("I'll add a type declaration for the
// module, since it ships none.", or a bold heading such as "**Issue 6:
// key zeroed in ShareDialog**"), so a file's line says what its change is
// for, not only what it touched.
func Said(changes []FileChange, msgs []abi.Message) {
	var scratch lowerer
	for i := range changes {
		c := &changes[i]
		if c.by == nil {
			continue
		}
		if c.Said = c.by.Str("instruction"); c.Said == "" && !c.by.IsShell() {
			c.Said = c.by.Str("description")
		}
		at := c.by.Index
		if c.Said != "" || at < 0 || at >= len(msgs) || msgs[at].Role != abi.RoleAssistant {
			continue
		}
		for _, s := range sentences(msgs[at].Text()) {
			if len(s) < 16 || strings.HasSuffix(s, "?") {
				continue
			}
			if hasMarker(scratch.lower(s), intentMarkers) || strings.HasPrefix(s, "**") && strings.HasSuffix(s, "**") {
				c.Said = s // the last announcement before the call
			}
		}
	}
}

func (fc FileChange) line(names int, last bool) string {
	var parts []string
	switch {
	case fc.Deleted:
		parts = append(parts, "deleted")
	case fc.Created:
		parts = append(parts, "created")
	case fc.Edits > 1:
		parts = append(parts, fmt.Sprintf("%d edits", fc.Edits))
	}
	for _, g := range []struct {
		label string
		names []string
	}{{"added", fc.Added}, {"changed", fc.Changed}, {"removed", fc.Removed}, {"touches", fc.Touched}} {
		if len(g.names) > 0 {
			parts = append(parts, g.label+" "+codeList(g.names, names))
		}
	}
	if last && fc.Last != "" && !fc.Deleted {
		parts = append(parts, "last: "+fc.Last)
	}
	if last && fc.Said != "" {
		parts = append(parts, "as the agent put it: “"+Plain(ClipHead(OneLine(fc.Said), 200))+"”")
	}
	line := Code(fc.Path)
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, "; ")
	}
	return line
}

type hunk struct {
	op, path, moveTo string
	minus, plus      string
}

// patchHunks reads an apply_patch patch per file: the operation and the
// removed and added lines.
func patchHunks(patch string) []hunk {
	var out []hunk
	var cur *hunk
	var minus, plus []string
	flush := func() {
		if cur != nil {
			cur.minus, cur.plus = strings.Join(minus, "\n"), strings.Join(plus, "\n")
			out = append(out, *cur)
		}
		cur, minus, plus = nil, nil, nil
	}
	for _, line := range strings.Split(patch, "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case strings.HasPrefix(line, "*** Add File: "):
			flush()
			cur = &hunk{op: "add", path: strings.TrimSpace(line[len("*** Add File: "):])}
		case strings.HasPrefix(line, "*** Update File: "):
			flush()
			cur = &hunk{op: "update", path: strings.TrimSpace(line[len("*** Update File: "):])}
		case strings.HasPrefix(line, "*** Delete File: "):
			flush()
			cur = &hunk{op: "delete", path: strings.TrimSpace(line[len("*** Delete File: "):])}
		case strings.HasPrefix(line, "*** Move to: ") && cur != nil:
			cur.moveTo = strings.TrimSpace(line[len("*** Move to: "):])
		case strings.HasPrefix(line, "***"):
			flush()
		case cur == nil:
		case strings.HasPrefix(line, "+"):
			plus = append(plus, line[1:])
		case strings.HasPrefix(line, "-"):
			minus = append(minus, line[1:])
		}
	}
	flush()
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func appendNew(list []string, s string) []string {
	if s == "" || contains(list, s) {
		return list
	}
	return append(list, s)
}
