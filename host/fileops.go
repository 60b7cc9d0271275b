package host

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// FileTools names the tools whose calls read or modify files, beyond the
// ones the engine knows (Read, Write, Edit, MultiEdit, NotebookEdit,
// apply_patch, str_replace editors, view, create, edit, read_file,
// write_file, and cat/sed/head/tail/nl in shell commands). Names match
// case-insensitively. The path is taken from file_path, path, filePath,
// notebook_path, target_file or filename.
type FileTools struct {
	Read   []string
	Modify []string
}

var (
	readTools   = []string{"read", "view", "read_file", "notebookread", "open", "open_file", "view_file", "cat"}
	modifyTools = []string{"write", "edit", "multiedit", "notebookedit", "write_file", "edit_file", "create", "create_file", "str_replace", "insert", "replace_in_file"}
	editorTools = []string{"str_replace_editor", "str_replace_based_edit_tool", "text_editor"}
	patchTools  = []string{"apply_patch", "patch"}
	shellTools  = []string{"bash", "shell", "shell_command", "exec_command", "run_terminal_cmd", "execute_command", "terminal"}
	pathKeys    = []string{"file_path", "path", "filePath", "notebook_path", "target_file", "filename", "file"}
)

// fileOps accumulates read and modified files in first-seen order.
type fileOps struct {
	read, modified map[string]int // path -> order seen
	n              int
	tools          map[string]string // lower-case tool name -> "read" | "modify"
}

func newFileOps(extra *FileTools) fileOps {
	f := fileOps{read: map[string]int{}, modified: map[string]int{}, tools: map[string]string{}}
	for _, t := range readTools {
		f.tools[t] = "read"
	}
	for _, t := range modifyTools {
		f.tools[t] = "modify"
	}
	for _, t := range editorTools {
		f.tools[t] = "editor"
	}
	for _, t := range patchTools {
		f.tools[t] = "patch"
	}
	for _, t := range shellTools {
		f.tools[t] = "shell"
	}
	if extra != nil {
		for _, t := range extra.Read {
			f.tools[strings.ToLower(t)] = "read"
		}
		for _, t := range extra.Modify {
			f.tools[strings.ToLower(t)] = "modify"
		}
	}
	return f
}

func (f *fileOps) add(path string, modified bool) {
	path = strings.TrimSpace(path)
	if path == "" || len(path) > 4096 || strings.ContainsAny(path, "\n\x00") {
		return
	}
	f.n++
	if modified {
		delete(f.read, path) // read-then-modified is modified
		if _, ok := f.modified[path]; !ok {
			f.modified[path] = f.n
		}
		return
	}
	if _, ok := f.modified[path]; ok {
		return
	}
	if _, ok := f.read[path]; !ok {
		f.read[path] = f.n
	}
}

// observe records the file operations of m's tool calls and returns them.
func (f *fileOps) observe(m *Message) []fileOp {
	var ops []fileOp
	for i := range m.Content {
		b := &m.Content[i]
		if b.Type != abi.BlockToolUse {
			continue
		}
		ops = append(ops, fileOpsOf(f.tools, b.Name, b.Input)...)
	}
	f.replay(ops)
	return ops
}

// replay records operations extracted earlier.
func (f *fileOps) replay(ops []fileOp) {
	for _, op := range ops {
		f.add(op.path, op.modified)
	}
}

func (f *fileOps) snapshot() abi.FileOps {
	return abi.FileOps{Read: ordered(f.read), Modified: ordered(f.modified)}
}

func ordered(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return m[out[i]] < m[out[j]] })
	return out
}

type fileOp struct {
	path     string
	modified bool
}

// fileOpsOf extracts the file operations of one tool call.
func fileOpsOf(tools map[string]string, name string, input json.RawMessage) []fileOp {
	kind := tools[strings.ToLower(name)]
	if kind == "" {
		return nil
	}
	var args map[string]any
	var raw string
	if err := json.Unmarshal(input, &args); err != nil {
		// Custom tools (Codex apply_patch) carry a bare string.
		if json.Unmarshal(input, &raw) != nil {
			return nil
		}
	}
	str := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := args[k].(string); ok && v != "" {
				return v
			}
		}
		return ""
	}
	switch kind {
	case "read", "modify":
		p := str(pathKeys...)
		if p == "" {
			return nil
		}
		return []fileOp{{p, kind == "modify"}}
	case "editor":
		p := str(pathKeys...)
		if p == "" {
			return nil
		}
		return []fileOp{{p, str("command") != "view"}}
	case "patch":
		if raw == "" {
			raw = str("input", "patch", "content")
		}
		return patchOps(raw)
	case "shell":
		cmd := raw
		if cmd == "" {
			cmd = str("command", "cmd")
		}
		if cmd == "" {
			if list, ok := args["command"].([]any); ok {
				var parts []string
				for _, p := range list {
					if s, ok := p.(string); ok {
						parts = append(parts, s)
					}
				}
				cmd = strings.Join(parts, " ")
			}
		}
		return shellOps(cmd)
	}
	return nil
}

// patchOps reads the file headers of an apply_patch envelope.
func patchOps(patch string) []fileOp {
	var ops []fileOp
	for _, line := range strings.Split(patch, "\n") {
		line = strings.TrimSpace(line)
		for _, h := range []string{"*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"} {
			if strings.HasPrefix(line, h) {
				ops = append(ops, fileOp{strings.TrimSpace(line[len(h):]), true})
			}
		}
	}
	return ops
}

// shellOps recognises the common ways a shell command reads or writes a
// file: cat, head, tail, nl, less, sed -n (read); sed -i, tee and output
// redirection (modify). Commands are split on pipes and ;, && and ||.
func shellOps(cmd string) []fileOp {
	var ops []fileOp
	for _, seg := range splitShell(cmd) {
		words := shellWords(seg)
		for i := 0; i < len(words); i++ {
			if (words[i] == ">" || words[i] == ">>") && i+1 < len(words) && looksLikePath(words[i+1]) {
				ops = append(ops, fileOp{words[i+1], true})
			}
		}
		if len(words) == 0 {
			continue
		}
		prog := words[0]
		if j := strings.LastIndex(prog, "/"); j >= 0 {
			prog = prog[j+1:]
		}
		args := words[1:]
		switch prog {
		case "cat", "head", "tail", "nl", "less", "more", "bat":
			for _, a := range args {
				if a == ">" || a == ">>" || a == "<<" || strings.HasPrefix(a, "<<") {
					break
				}
				if !strings.HasPrefix(a, "-") && looksLikePath(a) {
					ops = append(ops, fileOp{a, false})
				}
			}
		case "sed":
			inPlace := false
			for _, a := range args {
				if a == "-i" || strings.HasPrefix(a, "-i") && !strings.HasPrefix(a, "-in") {
					inPlace = true
				}
			}
			// The last argument is the file; earlier ones are scripts and flags.
			if n := len(args); n >= 2 && looksLikePath(args[n-1]) && !strings.HasPrefix(args[n-1], "-") {
				ops = append(ops, fileOp{args[n-1], inPlace})
			}
		case "tee":
			for _, a := range args {
				if !strings.HasPrefix(a, "-") && looksLikePath(a) {
					ops = append(ops, fileOp{a, true})
				}
			}
		}
	}
	return ops
}

func splitShell(cmd string) []string {
	r := strings.NewReplacer("&&", "\n", "||", "\n", ";", "\n", "|", "\n")
	return strings.Split(r.Replace(cmd), "\n")
}

// shellWords splits on blanks and strips simple quotes; enough to find
// file arguments, not a shell parser.
func shellWords(seg string) []string {
	f := strings.Fields(seg)
	out := f[:0]
	for _, w := range f {
		w = strings.Trim(w, `"'`)
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

func looksLikePath(s string) bool {
	if s == "" || strings.ContainsAny(s, "*?$`(){}[]<>|&;=") || strings.HasPrefix(s, "/dev/") {
		return false
	}
	return strings.Contains(s, "/") || strings.Contains(s, ".")
}
