package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is one line of go test -json (cmd/test2json), with the build
// events go test adds.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output, build-fail
}

// maxLine bounds one line of go test -json; a longer one (a test that
// prints megabytes without a newline) is an error, not a silent cut.
const maxLine = 16 << 20

type testKey struct{ pkg, test string }

type skipped struct {
	testKey
	reason string
}

// summary turns go test -json into go test's terse output and a tally.
type summary struct {
	out io.Writer

	// Output of each running test, printed if it fails, read for the
	// reason if it skips.
	running map[testKey][]string

	passed, failed int
	skips          []skipped
	failedTests    map[string]int // failed tests per package
	failedPackages []string       // packages that failed with no failed test: a build error, a panic in TestMain, a timeout
}

func newSummary(out io.Writer) *summary {
	return &summary{out: out, running: map[testKey][]string{}, failedTests: map[string]int{}}
}

func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not an event: go test printed it (a vet error with -vet).
			fmt.Fprintln(s.out, sc.Text())
			continue
		}
		s.event(e)
	}
	return sc.Err()
}

func (s *summary) event(e event) {
	if e.Action == "build-output" {
		fmt.Fprint(s.out, e.Output)
		return
	}
	if e.Test == "" {
		s.packageEvent(e)
		return
	}
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "output":
		s.running[k] = append(s.running[k], e.Output)
	case "pass":
		s.passed++
		delete(s.running, k)
	case "skip":
		s.skips = append(s.skips, skipped{k, skipReason(s.running[k])})
		delete(s.running, k)
	case "fail":
		s.failed++
		s.failedTests[e.Package]++
		s.printOutput(k)
	}
}

func (s *summary) packageEvent(e event) {
	switch e.Action {
	case "output":
		// go test without -v closes a passing package with its ok line
		// alone.
		if e.Output != "PASS\n" {
			fmt.Fprint(s.out, e.Output)
		}
	case "fail":
		if s.failedTests[e.Package] == 0 {
			s.failed++
			s.failedPackages = append(s.failedPackages, e.Package)
		}
		// Tests still running when their package failed (a panic, a
		// timeout) print what they had said.
		for k := range s.running {
			if k.pkg == e.Package {
				s.printOutput(k)
			}
		}
	}
}

// printOutput prints what test k said, without go test's RUN, PAUSE,
// CONT and NAME lines (which go test without -v leaves out too).
func (s *summary) printOutput(k testKey) {
	for _, line := range s.running[k] {
		if !strings.HasPrefix(line, "=== ") {
			fmt.Fprint(s.out, line)
		}
	}
	delete(s.running, k)
}

// skipReason is what a skipped test logged: its t.Skip message and any
// t.Log before it, without go test's own RUN and SKIP lines.
func skipReason(lines []string) string {
	var parts []string
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "=== ") || strings.HasPrefix(line, "--- SKIP") {
			continue
		}
		parts = append(parts, line)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " / ")
}

// finish prints the skipped tests, the packages that failed without a
// failed test, and the closing tally.
func (s *summary) finish() {
	if len(s.skips) > 0 {
		sort.Slice(s.skips, func(i, j int) bool {
			a, b := s.skips[i], s.skips[j]
			return a.pkg < b.pkg || a.pkg == b.pkg && a.test < b.test
		})
		fmt.Fprintf(s.out, "\nSkipped (%d):\n", len(s.skips))
		for _, sk := range s.skips {
			fmt.Fprintf(s.out, "  %s %s: %s\n", sk.pkg, sk.test, sk.reason)
		}
	}
	if len(s.failedPackages) > 0 {
		fmt.Fprintf(s.out, "\nFailed without a failed test (a build error, a panic outside a test, a timeout):\n")
		for _, p := range s.failedPackages {
			fmt.Fprintf(s.out, "  %s\n", p)
		}
	}
	fmt.Fprintf(s.out, "\n%d passed, %d failed, %d skipped\n", s.passed, s.failed, len(s.skips))
}
