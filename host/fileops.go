package host

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"sort"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/jsonscan"
	"github.com/compact-host/compact-host/internal/heredoc"
)

// FileTools names the tools whose calls read or modify files, beyond the
// ones the engine knows (Read, Write, Edit, MultiEdit, NotebookEdit,
// apply_patch, str_replace editors, view, create, edit, read_file,
// write_file, and cat/sed/head/tail/nl, tee and > in shell commands,
// where the body of a here-document is data, not commands). Names match
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

// Tool kinds: what a call of the tool does to files.
const (
	kindNone   = ""
	kindRead   = "read"
	kindModify = "modify"
	kindEditor = "editor"
	kindPatch  = "patch"
	kindShell  = "shell"
)

// defaultTools maps the lower-case names of the tools the engine knows to
// their kind. It is shared, read-only, by every session without extra
// FileTools.
var defaultTools = func() map[string]string {
	m := map[string]string{}
	for _, list := range []struct {
		names []string
		kind  string
	}{{readTools, kindRead}, {modifyTools, kindModify}, {editorTools, kindEditor}, {patchTools, kindPatch}, {shellTools, kindShell}} {
		for _, t := range list.names {
			m[t] = list.kind
		}
	}
	return m
}()

// maxNameCache bounds the per-session cache of tool names as written; a
// session calls a handful of tools, so the bound only stops a hostile one.
const maxNameCache = 256

// fileOps accumulates read and modified files in first-seen order, and
// keeps enough order to answer what they were before any message
// (fileOpsBefore) without replaying the session.
type fileOps struct {
	tools map[string]string // lower-case tool name -> kind; read-only, maybe shared
	names map[string]string // tool name as written -> kind: saves lower-casing every call

	seq   int                   // valid operations recorded so far
	paths map[string]*pathFirst // per path, the sequence numbers of its first read and modification
	reads []*pathFirst          // paths in order of their first read
	mods  []*pathFirst          // paths in order of their first modification
	slab  []pathFirst           // where new pathFirsts go, a block at a time

	calls opsReader // reused for every call
}

// pathFirst is when a path was first read and first modified: sequence
// numbers of fileOps.add (1-based), 0 when it never was.
type pathFirst struct {
	path           string
	read, modified int
}

func newFileOps(extra *FileTools) fileOps {
	f := fileOps{tools: defaultTools, paths: map[string]*pathFirst{}}
	if extra != nil && len(extra.Read)+len(extra.Modify) > 0 {
		f.tools = make(map[string]string, len(defaultTools)+len(extra.Read)+len(extra.Modify))
		for k, v := range defaultTools {
			f.tools[k] = v
		}
		for _, t := range extra.Read {
			f.tools[strings.ToLower(t)] = kindRead
		}
		for _, t := range extra.Modify {
			f.tools[strings.ToLower(t)] = kindModify
		}
	}
	return f
}

// kindOf is the kind of the tool called name.
func (f *fileOps) kindOf(name string) string {
	if k, ok := f.names[name]; ok {
		return k
	}
	k := f.tools[strings.ToLower(name)]
	if f.names == nil {
		f.names = map[string]string{}
	}
	if len(f.names) < maxNameCache {
		f.names[name] = k
	}
	return k
}

// add records one operation. A file read and later modified counts as
// modified only; a read after a modification adds nothing.
func (f *fileOps) add(path string, modified bool) {
	path = strings.TrimSpace(path)
	if path == "" || len(path) > 4096 || strings.IndexByte(path, '\n') >= 0 || strings.IndexByte(path, 0) >= 0 {
		return
	}
	f.seq++
	p := f.paths[path]
	if p == nil {
		if len(f.slab) == cap(f.slab) {
			f.slab = make([]pathFirst, 0, 32)
		}
		// path may point into the call's input or a reused buffer.
		f.slab = append(f.slab, pathFirst{path: strings.Clone(path)})
		p = &f.slab[len(f.slab)-1]
		f.paths[p.path] = p
	}
	switch {
	case modified && p.modified == 0:
		p.modified = f.seq
		f.mods = append(f.mods, p)
	case !modified && p.read == 0 && p.modified == 0:
		p.read = f.seq
		f.reads = append(f.reads, p)
	}
}

// observe records the file operations of m's tool calls.
func (f *fileOps) observe(m *Message) {
	for i := range m.Content {
		b := &m.Content[i]
		if b.Type != abi.BlockToolUse {
			continue
		}
		kind := f.kindOf(b.Name)
		if kind == kindNone {
			continue
		}
		for _, op := range f.calls.read(kind, b.Input) {
			f.add(op.path, op.modified)
		}
	}
}

// snapshot is every operation recorded so far.
func (f *fileOps) snapshot() abi.FileOps { return f.before(f.seq + 1) }

// before is the file operations recorded before sequence number seq: what
// a fileOps fed only those operations would snapshot. It costs one pass
// over the distinct paths, whatever the length of the session.
func (f *fileOps) before(seq int) abi.FileOps {
	nm := sort.Search(len(f.mods), func(i int) bool { return f.mods[i].modified >= seq })
	nr := sort.Search(len(f.reads), func(i int) bool { return f.reads[i].read >= seq })
	out := abi.FileOps{Read: make([]string, 0, nr), Modified: make([]string, nm)}
	for i, p := range f.mods[:nm] {
		out.Modified[i] = p.path
	}
	for _, p := range f.reads[:nr] {
		if p.modified == 0 || p.modified >= seq {
			out.Read = append(out.Read, p.path)
		}
	}
	return out
}

type fileOp struct {
	path     string
	modified bool
}

// toolFileOps extracts the file operations of a call of a tool of kind.
func toolFileOps(kind string, input json.RawMessage) []fileOp {
	var r opsReader
	return r.read(kind, input)
}

// opsReader extracts the file operations of tool calls, keeping its
// buffers from call to call: an append decodes no string to the heap. What
// read returns, paths included, is valid until its next call.
type opsReader struct {
	buf []byte   // the strings of the current call that had to be decoded
	ops []fileOp // the current call's operations
}

// read is toolFileOps. It reads only the members it needs from input
// (toolArgsOf); input it cannot read so goes through encoding/json
// (decodedFileOps), with the same result.
func (r *opsReader) read(kind string, input json.RawMessage) []fileOp {
	a, ok := toolArgsOf(input)
	if !ok {
		return decodedFileOps(kind, input)
	}
	r.buf, r.ops = r.buf[:0], r.ops[:0]
	str := func(keys ...string) string {
		for _, k := range keys {
			if v := a.str(k, &r.buf); v != "" {
				return v
			}
		}
		return ""
	}
	switch kind {
	case kindRead, kindModify:
		p := str(pathKeys...)
		if p == "" {
			return nil
		}
		r.ops = append(r.ops, fileOp{p, kind == kindModify})
	case kindEditor:
		p := str(pathKeys...)
		if p == "" {
			return nil
		}
		r.ops = append(r.ops, fileOp{p, str("command") != "view"})
	case kindPatch:
		raw := a.raw
		if raw == "" {
			raw = str("input", "patch", "content")
		}
		r.ops = appendPatchOps(r.ops, raw)
	case kindShell:
		cmd := a.raw
		if cmd == "" {
			cmd = a.command(&r.buf)
		}
		if cmd == "" {
			cmd = a.commandList(&r.buf)
		}
		r.ops = appendShellOps(r.ops, cmd)
	}
	if len(r.ops) == 0 {
		return nil
	}
	return r.ops
}

// decodedFileOps is toolFileOps through encoding/json: the reference the
// scanner must agree with, and the path for input the scanner declines.
func decodedFileOps(kind string, input json.RawMessage) []fileOp {
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
	case kindRead, kindModify:
		p := str(pathKeys...)
		if p == "" {
			return nil
		}
		return []fileOp{{p, kind == kindModify}}
	case kindEditor:
		p := str(pathKeys...)
		if p == "" {
			return nil
		}
		return []fileOp{{p, str("command") != "view"}}
	case kindPatch:
		if raw == "" {
			raw = str("input", "patch", "content")
		}
		return patchOps(raw)
	case kindShell:
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

// patchHeaders start the lines of an apply_patch envelope that name a file.
var patchHeaders = []string{"*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"}

// patchOps reads the file headers of an apply_patch envelope.
func patchOps(patch string) []fileOp { return appendPatchOps(nil, patch) }

// appendPatchOps is patchOps appending to ops.
func appendPatchOps(ops []fileOp, patch string) []fileOp {
	if !strings.Contains(patch, "*** ") {
		return ops
	}
	for rest := patch; rest != ""; {
		line, after, _ := strings.Cut(rest, "\n")
		rest = after
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "*** ") {
			continue
		}
		for _, h := range patchHeaders {
			if strings.HasPrefix(line, h) {
				ops = append(ops, fileOp{strings.TrimSpace(line[len(h):]), true})
			}
		}
	}
	return ops
}

// shellPrograms are the programs shellOps reads file arguments of.
var shellPrograms = []string{"cat", "head", "tail", "nl", "less", "more", "bat", "sed", "tee"}

// shellOps recognises the common ways a shell command reads or writes a
// file: cat, head, tail, nl, less, sed -n (read); sed -i, tee and output
// redirection (modify). Commands are split on pipes and ;, && and ||. The
// body of a here-document is data, not commands, and is passed over
// (package heredoc).
func shellOps(cmd string) []fileOp { return appendShellOps(nil, cmd) }

// appendShellOps is shellOps appending to ops.
func appendShellOps(ops []fileOp, cmd string) []fileOp {
	var wordBuf [32]string
	words := wordBuf[:0]
	// redirect is the offset in cmd of the next '>' at or after the
	// segment that may make a redirection word, len(cmd) if none.
	redirect := nextRedirect(cmd, 0)
	// heredocAt is the offset of the next "<<" at or after the start of the
	// current line, len(cmd) if none; line is where that line starts.
	heredocAt, line := indexFrom(cmd, "<<", 0), 0
	var bodies heredoc.Reader
	segs := newShellSegments(cmd)
	for at := 0; at < len(cmd); {
		end, next := segs.from(at)
		seg := cmd[at:end]
		if redirect < at {
			redirect = nextRedirect(cmd, at)
		}
		at = next
		if end < len(cmd) && cmd[end] == '\n' {
			// The line ends here: skip the bodies of its here-documents.
			if heredocAt < end {
				if skip := bodies.BodiesEnd(cmd, line, end); skip > next {
					at = skip
				}
			}
			if line = at; heredocAt < at {
				heredocAt = indexFrom(cmd, "<<", at)
			}
		}
		if redirect >= end && quietSegment(seg) {
			continue
		}
		words = shellWords(seg, words[:0])
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

// nextRedirect is the offset of the first '>' at or after from that may
// be part of a word shellWords makes ">" or ">>", len(cmd) if none: the
// run of '>' it starts is at most two long and is followed, past any
// quotes, by a blank, a non-ASCII byte (a Unicode blank, maybe) or the
// end. "2>&1", ">/dev/null" and "=>" make none, so a segment holding only
// those is not split into words for them.
func nextRedirect(cmd string, from int) int {
	for {
		i := indexByteFrom(cmd, '>', from)
		if i == len(cmd) {
			return i
		}
		j := i
		for j < len(cmd) && cmd[j] == '>' {
			j++
		}
		if j-i <= 2 {
			for j < len(cmd) && (cmd[j] == '"' || cmd[j] == '\'') {
				j++
			}
			if j == len(cmd) || cmd[j] >= utf8.RuneSelf || asciiSpace[cmd[j]] {
				return i
			}
		}
		from = j
	}
}

// indexFrom is the offset in s of the first sub at or after from, len(s)
// if none.
func indexFrom(s, sub string, from int) int {
	if j := strings.Index(s[from:], sub); j >= 0 {
		return from + j
	}
	return len(s)
}

// indexByteFrom is indexFrom for one byte.
func indexByteFrom(s string, c byte, from int) int {
	if j := strings.IndexByte(s[from:], c); j >= 0 {
		return from + j
	}
	return len(s)
}

// quietSegment reports that shellOps finds nothing in seg, which has no
// redirection, without splitting it into words: its first word is none of
// the programs it reads (the lines of a here-document, mostly). It is
// false whenever it cannot tell cheaply.
func quietSegment(seg string) bool {
	const (
		lsb = 0x0101010101010101
		msb = 0x8080808080808080
	)
	b := unsafe.Slice(unsafe.StringData(seg), len(seg))
	i := 0
	// The indentation of a here-document's line eight spaces at a time.
	for i+8 <= len(b) && binary.LittleEndian.Uint64((*[8]byte)(b[i : i+8])[:]) == lsb*' ' {
		i += 8
	}
	for i < len(seg) && seg[i] < utf8.RuneSelf && asciiSpace[seg[i]] {
		i++
	}
	j, slash := i, false
	// Eight bytes at a time to the first that may end the word: below
	// '!' or not ASCII. The lowest such byte in w is the lowest flagged
	// in stop (no borrow crosses a byte at or above '!'), and a slash
	// before it flags a byte below it in sl, as a zero byte of w^'/'.
	for j+8 <= len(b) {
		w := binary.LittleEndian.Uint64((*[8]byte)(b[j : j+8])[:])
		stop := (w - lsb*'!' | w) & msb
		y := w ^ lsb*'/'
		sl := (y - lsb) &^ y & msb
		if stop != 0 {
			k := bits.TrailingZeros64(stop) &^ 7
			slash = slash || sl&(1<<k-1) != 0
			j += k >> 3
			break
		}
		slash = slash || sl != 0
		j += 8
	}
	// Byte by byte from there, as the control bytes that are no blank
	// belong to the word.
	for ; j < len(seg); j++ {
		c := seg[j]
		if c >= utf8.RuneSelf {
			return false // maybe a Unicode blank: leave it to shellWords
		}
		if asciiSpace[c] {
			break
		}
		slash = slash || c == '/'
	}
	first := trimQuotes(seg[i:j])
	if first == "" {
		return i == j && j == len(seg) // a blank segment; an empty quoted word is skipped by shellWords
	}
	if slash {
		first = first[strings.LastIndexByte(first, '/')+1:]
	}
	return !isShellProgram(first)
}

// isShellProgram reports whether w is one of shellPrograms.
func isShellProgram(w string) bool {
	switch w {
	case "cat", "head", "tail", "nl", "less", "more", "bat", "sed", "tee":
		return true
	}
	return false
}

// trimQuotes is strings.Trim(w, `"'`) without building a cutset.
func trimQuotes(w string) string {
	for len(w) > 0 && (w[0] == '"' || w[0] == '\'') {
		w = w[1:]
	}
	for len(w) > 0 && (w[len(w)-1] == '"' || w[len(w)-1] == '\'') {
		w = w[:len(w)-1]
	}
	return w
}

// shellSegments finds the segments of a command: the ends are the
// newlines, ;, |, || and && in it. The next of each separator is found
// with one strings.IndexByte (strings.Index for &&) and kept until a
// segment passes it, so a here-document of many lines, which holds few
// separators but newlines, costs one search a line.
type shellSegments struct {
	cmd  string
	next [4]int // the offset of the next '\n', ';', '|' and "&&" at or after the last search; -1 before the first
}

func newShellSegments(cmd string) shellSegments {
	return shellSegments{cmd: cmd, next: [4]int{-1, -1, -1, -1}}
}

// from is where the segment starting at at ends and where the next one
// starts.
func (s *shellSegments) from(at int) (end, next int) {
	end = len(s.cmd)
	for k := range s.next {
		if s.next[k] < at {
			var j int
			if k < 3 {
				j = strings.IndexByte(s.cmd[at:], "\n;|"[k])
			} else {
				j = strings.Index(s.cmd[at:], "&&")
			}
			if j < 0 {
				s.next[k] = len(s.cmd)
			} else {
				s.next[k] = at + j
			}
		}
		end = min(end, s.next[k])
	}
	switch {
	case end == len(s.cmd):
		return end, end
	case end == s.next[3]:
		return end, end + 2
	}
	return end, end + 1
}

// shellWords splits on blanks and strips simple quotes, appending to out;
// enough to find file arguments, not a shell parser.
func shellWords(seg string, out []string) []string {
	add := func(w string) {
		if w = trimQuotes(w); w != "" {
			out = append(out, w)
		}
	}
	base, start := len(out), -1
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c >= utf8.RuneSelf {
			// strings.Fields knows the Unicode blanks.
			out = out[:base]
			for _, w := range strings.Fields(seg) {
				add(w)
			}
			return out
		}
		if asciiSpace[c] {
			if start >= 0 {
				add(seg[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		add(seg[start:])
	}
	return out
}

// asciiSpace are the ASCII bytes strings.Fields splits at.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

func looksLikePath(s string) bool {
	if strings.HasPrefix(s, "/dev/") {
		return false
	}
	sep := false
	for i := 0; i < len(s); i++ {
		switch pathBytes[s[i]] {
		case pathStop:
			return false
		case pathSep:
			sep = true
		}
	}
	return sep
}

// pathBytes classes the bytes looksLikePath looks at: one pass over a
// word where strings.ContainsAny built its set on every call.
var pathBytes = func() (t [256]uint8) {
	for _, c := range []byte("*?$`(){}[]<>|&;=") {
		t[c] = pathStop
	}
	t['/'], t['.'] = pathSep, pathSep
	return t
}()

const (
	pathStop = 1 + iota // a shell metacharacter or glob: not a path
	pathSep             // '/' or '.': one makes a path
)

// toolArgs are the members of a tool call's input that file operations
// come from, read without decoding the rest.
type toolArgs struct {
	input []byte
	raw   string // the input itself, when it is a JSON string
	// the last value of each wanted key, as encoding/json into a map keeps
	// the last of duplicate keys; End 0 when absent.
	vals [len(argKeys)]jsonscan.Member
}

// argKeys are the input members any kind reads: the path keys, then the
// command, patch and shell keys.
var argKeys = [...]string{"file_path", "path", "filePath", "notebook_path", "target_file", "filename", "file", "command", "cmd", "input", "patch", "content"}

const argCommand = 7 // index of "command" in argKeys

// argKey is the index of k in argKeys, or -1: a switch, which compares
// lengths before bytes, where a loop compared every key.
func argKey(k []byte) int {
	switch string(k) {
	case "file_path":
		return 0
	case "path":
		return 1
	case "filePath":
		return 2
	case "notebook_path":
		return 3
	case "target_file":
		return 4
	case "filename":
		return 5
	case "file":
		return 6
	case "command":
		return 7
	case "cmd":
		return 8
	case "input":
		return 9
	case "patch":
		return 10
	case "content":
		return 11
	}
	return -1
}

// str is the value of key when it is a string, else "". A string with
// no escape is read in place; others are decoded at the end of *buf. The
// result lives as long as the input and *buf's bytes.
func (a *toolArgs) str(key string, buf *[]byte) string {
	for i, w := range argKeys {
		if w == key {
			v := a.vals[i]
			if v.End == 0 || a.input[v.Start] != '"' {
				return ""
			}
			return decodeInto(buf, a.input[v.Start:v.End], v.ValFlags)
		}
	}
	return ""
}

// decodeInto is the value of the valid JSON string s in which String found
// flags: s's own bytes when nothing needs decoding, else bytes appended to
// *buf, which are not changed until *buf is reset.
func decodeInto(buf *[]byte, s []byte, flags int) string {
	if flags == 0 {
		return unsafe.String(unsafe.SliceData(s[1:]), len(s)-2)
	}
	start := len(*buf)
	*buf = jsonscan.AppendStringValue(*buf, s, flags)
	v := (*buf)[start:]
	return unsafe.String(unsafe.SliceData(v), len(v))
}

// command is str("command", "cmd") for a shell command: decoded by
// appendCommand, without the bodies of its here-documents.
func (a *toolArgs) command(buf *[]byte) string {
	for _, k := range [...]int{argCommand, argCommand + 1} {
		v := a.vals[k]
		if v.End == 0 || a.input[v.Start] != '"' {
			continue
		}
		start := len(*buf)
		*buf = appendCommand(*buf, a.input[v.Start:v.End], v.ValFlags)
		if out := (*buf)[start:]; len(out) > 0 {
			return unsafe.String(unsafe.SliceData(out), len(out))
		}
	}
	return ""
}

// appendCommand appends the value of the valid JSON string s (quotes
// included), in which String found flags, to dst as AppendStringValue
// does, but for the bodies of the here-documents that shellOps passes
// over: their lines are left out, each terminator line kept, so shellOps
// reads the same operations from it without the bodies being decoded.
// The raw text tells the lines apart only where no \u escape can spell a
// newline or a delimiter, and the terminator only for a delimiter that no
// escape spells (plainDelimiter) and without <<-: elsewhere the rest is
// decoded whole.
func appendCommand(dst, s []byte, flags int) []byte {
	body := s[1 : len(s)-1]
	if flags&jsonscan.Escape == 0 || flags&jsonscan.UnicodeEscape != 0 {
		return jsonscan.AppendBodyValue(dst, body, flags)
	}
	base := len(dst)
	pos := 0    // decoded up to here; never inside an escape
	misses := 0 // operators without a terminator, as heredoc.Reader counts them
	for misses < heredoc.MaxMisses {
		p := bytes.Index(body[pos:], []byte("<<"))
		if p < 0 {
			break
		}
		nl := rawNewline(body, pos+p)
		if nl < 0 {
			break // the last line: no body follows
		}
		dst = jsonscan.AppendBodyValue(dst, body[pos:nl], flags)
		pos = nl
		ls := base + bytes.LastIndexByte(dst[base:], '\n') + 1
		line := unsafe.String(unsafe.SliceData(dst[ls:]), len(dst)-ls)
		at := nl + 2 // where the next body starts
		for i := 0; ; {
			delim, tabs, next, ok := heredoc.Op(line, i)
			if !ok {
				break
			}
			i = next
			if tabs || !plainDelimiter(delim) {
				return jsonscan.AppendBodyValue(dst, body[pos:], flags)
			}
			end := rawTerminator(body, at, delim)
			if end < 0 {
				misses++
				break // not skipped, as shellOps does
			}
			dst = append(append(dst, '\n'), delim...)
			pos, at = end, end+2
		}
		if pos == len(body) {
			return dst
		}
	}
	return jsonscan.AppendBodyValue(dst, body[pos:], flags)
}

// plainDelimiter reports whether d is made of letters, digits, '_', '-'
// and '.', which a JSON string holds as they are: no escape but \u spells
// one.
func plainDelimiter(d string) bool {
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// rawNewline is the offset in the body of a JSON string of the first \n
// escape at or after i, -1 if none: a backslash and an n, where the
// backslash ends an odd run (an even run is escaped backslashes).
func rawNewline(body []byte, i int) int {
	for {
		j := bytes.Index(body[i:], []byte(`\n`))
		if j < 0 {
			return -1
		}
		j += i
		if backslashRun(body, j)%2 == 1 {
			return j
		}
		i = j + 2
	}
}

// backslashRun is the length of the run of backslashes that ends at
// body[j].
func backslashRun(body []byte, j int) int {
	n := 0
	for ; j >= 0 && body[j] == '\\'; j-- {
		n++
	}
	return n
}

// rawTerminator finds the first line at or after from (a line start) of
// the body of a JSON string with no \u escape that is the plain delimiter
// delim, and returns the offset just past it (its \n escape, or the end);
// -1 if there is none.
func rawTerminator(body []byte, from int, delim string) int {
	for q := from; q < len(body); {
		j := bytes.Index(body[q:], []byte(delim))
		if j < 0 {
			return -1
		}
		s, e := q+j, q+j+len(delim)
		atStart := s == from || s >= 2 && body[s-1] == 'n' && body[s-2] == '\\' && backslashRun(body, s-2)%2 == 1
		if atStart && (e == len(body) || e+1 < len(body) && body[e] == '\\' && body[e+1] == 'n') {
			return e
		}
		q = s + 1
	}
	return -1
}

// commandList joins the string elements of a command given as an array
// (Codex's ["bash", "-lc", "..."]), at the end of *buf.
func (a *toolArgs) commandList(buf *[]byte) string {
	v := a.vals[argCommand]
	if v.End == 0 || a.input[v.Start] != '[' {
		return ""
	}
	start, parts := len(*buf), 0
	b := a.input[:v.End]
	i := jsonscan.SkipWS(b, v.Start+1)
	for i < v.End && b[i] != ']' {
		end, _ := jsonscan.Scanner{}.Value(b, i)
		if b[i] == '"' {
			if parts > 0 {
				*buf = append(*buf, ' ')
			}
			_, flags := jsonscan.String(b, i)
			*buf = jsonscan.AppendStringValue(*buf, b[i:end], flags)
			parts++
		}
		i = jsonscan.SkipWS(b, end)
		if i < v.End && b[i] == ',' {
			i = jsonscan.SkipWS(b, i+1)
		}
	}
	out := (*buf)[start:]
	return unsafe.String(unsafe.SliceData(out), len(out))
}

// argScanner reads tool inputs as encoding/json decodes them into a map,
// numbers as float64.
var argScanner = jsonscan.Scanner{Float64: true}

// toolArgsOf scans input for the members toolFileOps reads. ok is false
// when the scanner declines (escaped or non-ASCII keys, deep nesting, big
// numbers) and the input must be decoded; invalid JSON is read as
// encoding/json reads it: no members.
func toolArgsOf(input []byte) (a toolArgs, ok bool) {
	a.input = input
	i := jsonscan.SkipWS(input, 0)
	if i == len(input) {
		return a, true
	}
	switch input[i] {
	case '"':
		end, flags := jsonscan.String(input, i)
		if flags >= 0 && jsonscan.SkipWS(input, end) == len(input) {
			a.raw = jsonscan.StringValue(input[i:end], flags)
		}
		return a, true
	case '{':
	default:
		return a, true // null, an array or a number: nothing to read
	}
	var buf [16]jsonscan.Member
	members, st := argScanner.Members(input, buf[:0])
	switch st {
	case jsonscan.Undecided:
		return a, false
	case jsonscan.Bad:
		return toolArgs{input: input}, true
	}
	for _, m := range members {
		if m.KeyFlags != 0 {
			return a, false // an escaped or non-ASCII key: let encoding/json read it
		}
		if k := argKey(m.Key); k >= 0 {
			a.vals[k] = m
		}
	}
	return a, true
}
