package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/jsonscan"
	"github.com/compact-host/compact-host/internal/heredoc"
)

// The reference below is the extraction as it was before the scanner: every
// input decoded into a map, every shell command split with a replacer, and
// the cumulative lists replayed from the first message. The fast paths must
// give the same results.

type refFileOps struct {
	read, modified map[string]int
	n              int
}

func newRefFileOps() *refFileOps {
	return &refFileOps{read: map[string]int{}, modified: map[string]int{}}
}

func (f *refFileOps) add(path string, modified bool) {
	path = strings.TrimSpace(path)
	if path == "" || len(path) > 4096 || strings.ContainsAny(path, "\n\x00") {
		return
	}
	f.n++
	if modified {
		delete(f.read, path)
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

func (f *refFileOps) snapshot() abi.FileOps {
	ordered := func(m map[string]int) []string {
		out := make([]string, 0, len(m))
		for p := range m {
			out = append(out, p)
		}
		sort.Slice(out, func(i, j int) bool { return m[out[i]] < m[out[j]] })
		return out
	}
	return abi.FileOps{Read: ordered(f.read), Modified: ordered(f.modified)}
}

func refToolFileOps(kind string, input json.RawMessage) []fileOp {
	var args map[string]any
	var raw string
	if err := json.Unmarshal(input, &args); err != nil {
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
		return refPatchOps(raw)
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
		return refShellOps(cmd)
	}
	return nil
}

func refPatchOps(patch string) []fileOp {
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

// refShellOps reads cmd line by line, without the bodies of its
// here-documents: heredoc.Strip, which FuzzStrip holds to a line-by-line
// reading of its rules.
func refShellOps(cmd string) []fileOp {
	var ops []fileOp
	for _, line := range strings.Split(heredoc.Strip(cmd), "\n") {
		ops = refLineOps(ops, line)
	}
	return ops
}

// refLineOps is the reference for one line of a command, split on pipes,
// ;, && and ||.
func refLineOps(ops []fileOp, line string) []fileOp {
	r := strings.NewReplacer("&&", "\n", "||", "\n", ";", "\n", "|", "\n")
	for _, seg := range strings.Split(r.Replace(line), "\n") {
		var words []string
		for _, w := range strings.Fields(seg) {
			if w = strings.Trim(w, `"'`); w != "" {
				words = append(words, w)
			}
		}
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

var toolKinds = []string{kindRead, kindModify, kindEditor, kindPatch, kindShell}

// assertSameOps checks the scanner and the decoding path against the
// reference for input read as a call of every kind of tool.
func assertSameOps(t *testing.T, input []byte) {
	t.Helper()
	for _, kind := range toolKinds {
		want := refToolFileOps(kind, input)
		assert.Equal(t, want, toolFileOps(kind, input), "scanner, %s tool, input %q", kind, input)
		assert.Equal(t, want, decodedFileOps(kind, input), "decoder, %s tool, input %q", kind, input)
	}
}

// fileOpsSeeds are inputs where a scanner could part ways with
// encoding/json: escapes, duplicates, invalid JSON, numbers a float64 cannot
// hold, deep nesting, bare strings, invalid UTF-8.
var fileOpsSeeds = []string{
	``, `null`, `[]`, `42`, `"just a string"`, `{}`, ` { } `, `{"file_path":"a.go"}`,
	`{"file_path":"","path":"b.go"}`, `{"file_path":"a.go","file_path":"c.go"}`, `{"file_path":"a.go","file_path":7}`,
	`{"file\u005fpath":"esc.go"}`, `{"file_path":"d\u00e9j\u00e0.go"}`, `{"file_path":"déjà.go"}`, "{\"file_path\":\"bad\xff.go\"}",
	"{\"f\xffile\":1,\"path\":\"p.go\"}", `{"file_path":"a.go",}`, `{"file_path":"a.go"`, `{"file_path":"a.go"} x`,
	`{"file_path":"a.go","n":1e400}`, `{"file_path":"a.go","n":1e-400}`, `{"file_path":"a.go","n":-0.5E+3}`, `{"file_path":"a.go","n":01}`,
	`{"file_path":"a.go","n":-}`, `{"file_path":"a.go","x":[1,{"y":[true,false,null]}]}`, `{"file_path":"a.go","x":tru}`,
	`{"path":"x.go","command":"view"}`, `{"path":"x.go","command":"create"}`, `{"command":["bash","-lc","cat a/b.txt > out.log"]}`,
	`{"command":["bash",1,"sed -i s/a/b/ x.py"]}`, `{"command":"","cmd":"head -n 5 README.md"}`, `{"command":[],"cmd":"tee log.txt"}`,
	`"cat go.mod && echo hi >> notes.md || tail x.txt; nl a.c | less b.c"`, `"\u00a0cat a.go"`, `"cat\u00a0a.go b.go"`, "\"x\x89 cat y.go\"",
	`"'' cat a.go"`, `"\"\" > out.txt"`, `"cat <<'EOF' > new.py\nimport os\ncat = 1\nEOF\nsed -n 1p new.py"`, `"  \t  "`, `"/bin/cat ./x.go"`, `{"command":"ls &&& cat q.go"}`,
	`{"input":"*** Begin Patch\n*** Update File: a.go\n*** Move to: b.go\n*** Add File: c.go\n*** Delete File: d.go\n*** End Patch"}`,
	`"*** Begin Patch\n  *** Add File: z.go  \n*** End Patch"`, `{"patch":"*** Update File: p.go"}`, `{"content":"*** Delete File: q.go"}`,
	`{"file_path":"a\u0000b.go"}`, `{"file_path":"a\nb.go"}`, "{\"file_path\":\"tab\tinside\"}", `{"file_path":"\ud800.go"}`,
	`{"x":` + strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100) + `,"file_path":"deep.go"}`,
	`{"x":"` + strings.Repeat(`a`, 400) + `","file_path":"` + strings.Repeat(`9`, 350) + `"}`, `{"n":` + strings.Repeat(`9`, 350) + `,"path":"big.go"}`,
}

func TestFileOpsScannerMatchesDecoding(t *testing.T) {
	for _, in := range fileOpsSeeds {
		assertSameOps(t, []byte(in))
	}
}

func FuzzFileOpsScanner(f *testing.F) {
	for _, in := range fileOpsSeeds {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, input []byte) { assertSameOps(t, input) })
}

// TestFileOpsCorpus runs every tool call of the corpus through the scanner
// as a call of every kind of tool, and compares the cumulative lists before
// every message with a replay from the start.
func TestFileOpsCorpus(t *testing.T) {
	for _, name := range corpusFiles {
		t.Run(name, func(t *testing.T) {
			msgs := corpusMessages(t, name)
			e, err := New(Config{ContextWindow: 1 << 30, Tokenizer: "chars"})
			require.NoError(t, err)
			s := e.NewSession()
			require.NoError(t, s.Append(msgs...))
			ref := newRefFileOps()
			calls := 0
			for i, m := range msgs {
				assert.Equal(t, ref.snapshot(), s.fileOpsBefore(i), "file ops before message %d", i)
				for _, b := range m.Content {
					if b.Type != abi.BlockToolUse {
						continue
					}
					calls++
					assertSameOps(t, b.Input)
					for _, op := range refToolFileOps(defaultTools[strings.ToLower(b.Name)], b.Input) {
						ref.add(op.path, op.modified)
					}
				}
			}
			assert.Equal(t, ref.snapshot(), s.FileOps(), "file ops at the end")
			assert.Equal(t, ref.snapshot(), s.fileOpsBefore(len(msgs)), "file ops before the end")
			t.Logf("%d calls, %d read, %d modified", calls, len(ref.read), len(ref.modified))
		})
	}
}

// TestFileOpsBeforeSynthetic checks the lists before every message of a
// session whose files are read, modified, read again and modified again in
// every order, by every kind of tool.
func TestFileOpsBeforeSynthetic(t *testing.T) {
	e, err := New(Config{ContextWindow: 1 << 30, Tokenizer: "chars", FileTools: FileTools{Read: []string{"Peek"}, Modify: []string{"Poke"}}})
	require.NoError(t, err)
	s := e.NewSession()
	ref := newRefFileOps()
	tools := map[string]string{"peek": kindRead, "poke": kindModify}
	for k, v := range defaultTools {
		tools[k] = v
	}
	var msgs []Message
	for i := range 300 {
		f := fmt.Sprintf("dir%d/f%d.go", i%5, (i*7)%23)
		var b Block
		switch i % 7 {
		case 0:
			b = call(fmt.Sprint("c", i), "Read", map[string]any{"file_path": f})
		case 1:
			b = call(fmt.Sprint("c", i), "Edit", map[string]any{"file_path": f, "old_string": "a", "new_string": "b"})
		case 2:
			b = call(fmt.Sprint("c", i), "bash", map[string]any{"command": "cat " + f + " | head -3 > out/" + f})
		case 3:
			b = call(fmt.Sprint("c", i), "str_replace_editor", map[string]any{"command": []string{"view", "create"}[i%2], "path": f})
		case 4:
			b = call(fmt.Sprint("c", i), "Peek", map[string]any{"path": f})
		case 5:
			b = call(fmt.Sprint("c", i), "POKE", map[string]any{"filename": f})
		default:
			b = call(fmt.Sprint("c", i), "apply_patch", map[string]any{"input": "*** Update File: " + f})
		}
		msgs = append(msgs, assistant("", b), results(result(b.ID, "ok")))
	}
	require.NoError(t, s.Append(msgs...))
	for i, m := range msgs {
		require.Equal(t, ref.snapshot(), s.fileOpsBefore(i), "file ops before message %d", i)
		for _, b := range m.Content {
			if b.Type == abi.BlockToolUse {
				for _, op := range refToolFileOps(tools[strings.ToLower(b.Name)], b.Input) {
					ref.add(op.path, op.modified)
				}
			}
		}
	}
	assert.Equal(t, ref.snapshot(), s.FileOps())
	assert.NotEmpty(t, ref.read, "the session reads files it never modifies")
	assert.NotEmpty(t, ref.modified)
}

func TestIsShellProgram(t *testing.T) {
	for _, p := range shellPrograms {
		assert.True(t, isShellProgram(p), p)
		assert.False(t, isShellProgram(p+"x"), p+"x")
		assert.False(t, isShellProgram(strings.ToUpper(p)), p)
	}
	assert.False(t, isShellProgram(""))
}

func TestShellWordsUnicodeBlanks(t *testing.T) {
	for _, seg := range []string{"cat a.go", "  cat\t'a.go'  \"b.go\" ", "cat\u00a0a.go b.go", "cat déjà.go\u2003x.go", "sed -n 1p\vf.go"} {
		var want []string
		for _, w := range strings.Fields(seg) {
			if w = strings.Trim(w, `"'`); w != "" {
				want = append(want, w)
			}
		}
		assert.Equal(t, want, shellWords(seg, []string{"kept"})[1:], "%q", seg)
	}
}

// The body of a here-document is data: a line in it that reads like a
// command records nothing, and the lines after its terminator are read
// again.
func TestShellOpsHereDocuments(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want []fileOp
	}{
		{"cd /testbed && cat > repro.py << 'EOF'\nimport os\ncat = open('notes.md')\nhead -3 x.go\nEOF\npython repro.py && cat out.log",
			[]fileOp{{"repro.py", true}, {"out.log", false}}},
		{"python3 <<PY\nsed -i s/a/b/ x.go\nPY\nhead a.go", []fileOp{{"a.go", false}}},
		{"cat <<A > a.txt <<-B\nhead a.go\nA\n\t\thead b.go\n\tB\nnl c.go", []fileOp{{"a.txt", true}, {"c.go", false}}},
		{"cat <<\\EOF | tee t.log\ntail z.go\nEOF", []fileOp{{"t.log", true}}},
		// No terminator: the lines stay commands, as they were read before.
		{"x=$((1<<2)); head a.go\nhead b.go", []fileOp{{"a.go", false}, {"b.go", false}}},
		{"cat <<EOF\nhead a.go\nEOF2", []fileOp{{"a.go", false}}},
		// After heredoc.MaxMisses operators without a terminator, bodies
		// are read as commands: the search for each costs the command's length.
		{strings.Repeat("x=$((1<<2))\n", heredoc.MaxMisses) + "cat <<E\nhead a.go\nE", []fileOp{{"a.go", false}}},
		// A here-string is not a here-document.
		{"cat <<< word > out.txt\nhead a.go\nword", []fileOp{{"out.txt", true}, {"a.go", false}}},
	} {
		assert.Equal(t, c.want, shellOps(c.cmd), "%q", c.cmd)
	}
}

// appendCommand leaves the bodies of here-documents out of the command
// it decodes, and keeps everything else.
func TestAppendCommandLeavesBodiesOut(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"cd /testbed && cat > r.py << 'EOF'\nimport os\nprint(\"a\\tb\")\nEOF\npython r.py", "cd /testbed && cat > r.py << 'EOF'\nEOF\npython r.py"},
		{"cat <<A <<B\na\nA\nb\nB\nhead x.go", "cat <<A <<B\nA\nB\nhead x.go"},
		{"cat <<A <<B\na\nA\nb\nhead x.go", "cat <<A <<B\nA\nb\nhead x.go"},        // B has no terminator: its lines stay
		{"cat <<-EOF\n\tx\n\tEOF\nhead y.go", "cat <<-EOF\n\tx\n\tEOF\nhead y.go"}, // <<-: decoded whole
		{"x=$((1<<2))\necho \"ok\"", "x=$((1<<2))\necho \"ok\""},
	} {
		assert.Equal(t, c.want, decodeCommand(t, rawJSON(c.cmd)), "%q", c.cmd)
	}
}

// rawJSON is cmd as a JSON string that writes <, > and & as they are, as
// most agents' logs do.
func rawJSON(cmd string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cmd); err != nil {
		panic(err)
	}
	return bytes.TrimSpace(b.Bytes())
}

func decodeCommand(t *testing.T, s []byte) string {
	t.Helper()
	end, flags := jsonscan.String(s, 0)
	require.Equal(t, len(s), end)
	require.GreaterOrEqual(t, flags, 0)
	return string(appendCommand([]byte("x"), s, flags)[1:])
}

// FuzzAppendCommand holds shellOps of what appendCommand decodes to
// shellOps of the whole command, for commands written as JSON with and
// without HTML escapes, and for the fuzzer's bytes read as a JSON string.
func FuzzAppendCommand(f *testing.F) {
	for _, c := range []string{"cat > a.py <<'EOF'\nhead b.go\nEOF\ntail c.go", "cat <<A <<B\nhead a.go\nA\nhead b.go\nB\nnl c.go",
		"cat <<E1\nx\\nE1\nE1\nhead z.go", "cat <<\"E\"\nE\\\nE\nsed -n 1p a.go", "cat <<EOF\u2028\nhead a.go\nEOF", "a<<b\nb\ncat c.go",
		strings.Repeat("x=$((1<<2))\n", 7) + "cat <<A <<B\nhead a.go\nA\nhead b.go\nB\nnl c.go"} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		for _, s := range [][]byte{rawJSON(cmd), []byte(`"` + cmd + `"`)} {
			end, flags := jsonscan.String(s, 0)
			if flags < 0 || end != len(s) {
				continue
			}
			whole := jsonscan.StringValue(s, flags)
			got := string(appendCommand(nil, s, flags))
			assert.Equal(t, shellOps(whole), shellOps(got), "%q decoded to %q", s, got)
		}
	})
}

// FuzzLooksLikePath holds looksLikePath to the form it replaced.
func FuzzLooksLikePath(f *testing.F) {
	for _, s := range []string{"", "a.go", "/dev/null", "src/x", "a*b.go", "x=1", "README", "..", "\u00e9/é", "$HOME/a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := s != "" && !strings.ContainsAny(s, "*?$`(){}[]<>|&;=") && !strings.HasPrefix(s, "/dev/") &&
			(strings.Contains(s, "/") || strings.Contains(s, "."))
		assert.Equal(t, want, looksLikePath(s), "%q", s)
	})
}

func FuzzShellOps(f *testing.F) {
	for _, c := range []string{"cat a.go | tee b.log", "\u00a0cat a.go", "x\x89 cat y.go", "'' cat a.go", "cat <<'EOF' > new.py\nimport os\ncat = 1\nEOF\nsed -n 1p new.py",
		"sed -i s/a/b/ x.py && head -3 README.md >> out.txt", "echo hi;nl\u2003a.c", "/usr/bin/less ./x.go||more y.md",
		"                /usr/local/bin/cat x.go", "        self.assertEqual(a/b, c)\n    tee/x.log\n", "abcdefgh/cat a.go", "ab\x01cdefghijk/head -1 a.go", "abcdefghijklmn/tail\u00a0a.go",
		"python3 <<'PY'\nopen('x')\nPY\ncat a.go", "cat > a.txt <<EOF && head b.go\ncat c.go\nEOF\ntail d.go", "cat <<A <<B\nhead a.go\nA\nhead b.go\nB\nnl c.go",
		"cat <<-\"E\"\n\thead a.go\n\tE\nsed -n 1p x.go", "echo $((1<<2)); head a.go\nhead b.go", "cat <<< word > out.txt\nhead a.go", "cat <<EOF\nhead a.go",
		"npm test 2>&1 | tail -5 > out.log", "echo x '>' y.txt", "echo x >>> y.txt", "echo x >\u00a0y.txt", "a=>b; echo >\"z.txt\" ok", "ls >/dev/null; echo >'q.md'"} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cmd string) { assert.Equal(t, refShellOps(cmd), shellOps(cmd), "%q", cmd) })
}

func TestArgKey(t *testing.T) {
	for i, k := range argKeys {
		assert.Equal(t, i, argKey([]byte(k)), k)
		assert.Equal(t, -1, argKey([]byte(k+"x")), k+"x")
		assert.Equal(t, -1, argKey([]byte(strings.ToUpper(k))), k)
	}
	assert.Equal(t, -1, argKey(nil))
}
