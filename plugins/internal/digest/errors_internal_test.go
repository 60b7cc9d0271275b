package digest

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/host/formats"
)

// errorLine is the specification of isErrorLine.
var errorLine = regexp.MustCompile(`(?i)^\S+:\d+:\d+: |^(?:error|fatal|panic)\b[:\[ ]|^\S*(?:error|exception)\b:|^(?:--- )?FAIL\b|^npm ERR!|: (?:error|fatal error)\b|\berror (?:TS|CS)\d+|command not found|no such file or directory|^Traceback \(most recent call last\)|exit (?:status|code):? [1-9]|exited with code [1-9]|<returncode>[1-9]`)

// errorLines are lines errorLine matches, one or more per alternative, in
// the case variants and Unicode folds (the Kelvin sign, the long s) it
// accepts.
var errorLines = []string{
	"main.go:12:3: undefined: x", "::1:2: x", "a:1:2:3: x", "src/a.ts:1:1: error", "C:\\x\\y.c:3:4: warning",
	"error: cannot find module", "ERROR[E0308]: mismatched types", "Fatal: no remote", "panic: runtime error", "panic: boom",
	"TypeError: x is not a function", "app.Exception: boom", "zerror:", "--- FAIL: TestX (0.01s)", "FAIL\tpkg 0.1s", "fail", "FAIL",
	"npm ERR! code ELIFECYCLE", "x.go: error: bad", "gcc: fatal error: no input files", "file.ts(1,2): error TS2304: Cannot find name",
	"Program.cs(3,4): error CS1002: ; expected", "error tſ1", "x error Cs9", "bash: foo: command not found", "cat: x: No such file or directory",
	"no ſuch file or directory", "Traceback (most recent call last):", "Tracebac\u212a (most recent call laſt)",
	"exit status 1", "Exit code: 2", "exit ſtatus 3", "EXIT CODE 4", "Process exited with code 1", "<returncode>2</returncode>",
	"make: *** [all] Error 2 exit code 2", "x\ty: error TS1", "ok: fatal error", "a: error", "é: error",
}

// notErrorLines are near misses.
var notErrorLines = []string{
	"if err != nil {", "throw new Error(`bad`);", "} catch (error) {", "Process exited with code 0", "the error handling is next",
	"12:30 started", "a:1:2:x", "a:1:2:\tx", ":1:2: x", "a :1:2: x", "errors: 3", "failed: 2", "FAILED", "--- FAILURE",
	"x: errors", "x: fatal errors", "myerror TS1", "x error TS", "x error T1", "exit status 0", "exit code:  1", "exited with code 0",
	"<returncode>0", "npm err", "Traceback (most recent call)", "x exception: y", "fatal", "panic!", "error", "",
}

func TestErrorLine(t *testing.T) {
	for _, line := range errorLines {
		if !errorLine.MatchString(line) {
			t.Errorf("errorLine does not match %q: fix the sample", line)
		}
		if !isErrorLine(line) {
			t.Errorf("isErrorLine(%q) = false, errorLine matches it", line)
		}
	}
	for _, line := range notErrorLines {
		if errorLine.MatchString(line) {
			t.Errorf("errorLine matches %q: fix the sample", line)
		}
		if isErrorLine(line) {
			t.Errorf("isErrorLine(%q) = true, errorLine does not match it", line)
		}
	}
	// Every line of every tool result of the corpus, and every output.
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "..", "shared", "corpus", "*"))
	var lines, matched int
	for _, path := range files {
		s, err := formats.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range Calls(s.Messages) {
			if c.Result == nil {
				continue
			}
			for _, flagged := range []bool{false, true} {
				if got, want := errorExcerpt(c.Result.Text, flagged), referenceExcerpt(c.Result.Text, flagged); got != want {
					t.Errorf("%s: excerpt of the result of %s (flagged %v):\n%s\nwant, with the regexp on every line:\n%s", filepath.Base(path), c.Brief(80), flagged, got, want)
				}
			}
			for _, l := range strings.Split(c.Result.Text, "\n") {
				l = strings.TrimSpace(l)
				lines++
				match := errorLine.MatchString(l)
				if isErrorLine(l) != match {
					t.Errorf("%s: isErrorLine(%q) = %v, errorLine says %v", filepath.Base(path), l, !match, match)
				}
				if match {
					matched++
				}
			}
		}
	}
	t.Logf("corpus: %d lines of tool output, %d error lines", lines, matched)
}

// FuzzErrorLine checks isErrorLine against errorLine on any text, and the
// excerpt of an output against the regexp run on its every line.
func FuzzErrorLine(f *testing.F) {
	for _, l := range append(errorLines, notErrorLines...) {
		f.Add(l)
	}
	f.Add(strings.Join(errorLines, "\n"))
	f.Add("ok\n  \u00a0fatal: x\r\n\tTraceback (most recent call last):\n  File x\nValueError: y\n")
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := isErrorLine(text), errorLine.MatchString(text); got != want {
			t.Errorf("isErrorLine(%q) = %v, errorLine says %v", text, got, want)
		}
		for _, flagged := range []bool{false, true} {
			if got, want := errorExcerpt(text, flagged), referenceExcerpt(text, flagged); got != want {
				t.Errorf("excerpt of %q (flagged %v) = %q, want %q", text, flagged, got, want)
			}
		}
	})
}

// referenceExcerpt is errorExcerpt as it was specified: the regexp on
// every line.
func referenceExcerpt(output string, flagged bool) string {
	var hits []string
	lines := strings.Split(output, "\n")
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if t == "" || !errorLine.MatchString(t) {
			continue
		}
		if strings.HasPrefix(t, "Traceback") {
			for j := i + 1; j < len(lines); j++ {
				if u := strings.TrimSpace(lines[j]); u != "" && !strings.HasPrefix(lines[j], " ") {
					t = u
					break
				}
			}
		}
		hits = appendUnique(hits, ClipHead(t, 240))
	}
	hits = pickHits(hits)
	if len(hits) == 0 && flagged {
		for _, line := range lines {
			if t := strings.TrimSpace(line); t != "" {
				hits = append(hits, ClipHead(t, 240))
				if len(hits) == 2 {
					break
				}
			}
		}
		if len(hits) == 0 {
			hits = []string{"(error with no output)"}
		}
	}
	return strings.Join(hits, "\n")
}
