package digest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/host/formats"
)

// errorLines are lines errorLine matches, one or more per alternative,
// in the case variants and Unicode folds (the Kelvin sign, the long s) the
// regexp accepts.
var errorLines = []string{
	"main.go:12:3: undefined: x", "::1:2: x", "a:1:2:3: x", "src/a.ts:1:1: error", "C:\\x\\y.c:3:4: warning",
	"error: cannot find module", "ERROR[E0308]: mismatched types", "Fatal: no remote", "panic: runtime error",
	"TypeError: x is not a function", "app.Exception: boom", "zerror:", "--- FAIL: TestX (0.01s)", "FAIL\tpkg 0.1s", "fail",
	"npm ERR! code ELIFECYCLE", "x.go: error: bad", "gcc: fatal error: no input files", "file.ts(1,2): error TS2304: Cannot find name",
	"Program.cs(3,4): error CS1002: ; expected", "error tſ1", "bash: foo: command not found", "cat: x: No such file or directory",
	"no ſuch file or directory", "Traceback (most recent call last):", "Tracebac\u212a (most recent call laſt)",
	"exit status 1", "Exit code: 2", "exit ſtatus 3", "Process exited with code 1", "<returncode>2</returncode>",
	"make: *** [all] Error 2 exit code 2", "x\ty: error TS1", "ok: fatal error",
}

func TestErrorLinePrefilter(t *testing.T) {
	for _, line := range errorLines {
		if !errorLine.MatchString(line) {
			t.Errorf("errorLine does not match %q: fix the sample", line)
		}
		if !mayBeErrorLine(line) {
			t.Errorf("prefilter rejects %q, which errorLine matches", line)
		}
	}
	// What the prefilter is for: code and logs that mention errors.
	for _, line := range []string{"if err != nil {", "throw new Error(`bad`);", "} catch (error) {", "Process exited with code 0", "the error handling is next", "12:30 started"} {
		if mayBeErrorLine(line) {
			t.Errorf("prefilter passes %q", line)
		}
	}
	// Every line of every tool result of the corpus.
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "..", "shared", "corpus", "*"))
	var lines, passed, matched int
	for _, path := range files {
		s, err := formats.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range Calls(s.Messages) {
			if c.Result == nil {
				continue
			}
			for _, l := range strings.Split(c.Result.Text, "\n") {
				l = strings.TrimSpace(l)
				lines++
				may, match := mayBeErrorLine(l), errorLine.MatchString(l)
				if match && !may {
					t.Errorf("%s: prefilter rejects %q, which errorLine matches", filepath.Base(path), l)
				}
				if may {
					passed++
				}
				if match {
					matched++
				}
			}
		}
	}
	t.Logf("corpus: %d lines of tool output, %d pass the prefilter, %d match", lines, passed, matched)
}

func FuzzErrorLinePrefilter(f *testing.F) {
	for _, l := range errorLines {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if errorLine.MatchString(line) && !mayBeErrorLine(line) {
			t.Errorf("prefilter rejects %q, which errorLine matches", line)
		}
	})
}
