// Command testsummary runs go test with the arguments it is given and
// prints what go test prints without -v (each package's closing line, the
// output of every failed test, build errors), then every skipped test
// with the reason it gave, then one line CI can read:
//
//	N passed, N failed, N skipped
//
// go test alone says nothing of a skip unless run with -v, and a test that
// skips for want of a program (redis-server, npm) says in its skip what to
// install. Usage, from the repository's root (the Makefile's test target):
//
//	go run ./internal/testsummary ./... ./abi/... ./sdk/...
//
// The go command is $GO, else go from PATH. The exit code is go test's: 0
// when everything passed, else 1 or more.
package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	goCmd := cmp.Or(os.Getenv("GO"), "go") // the Makefile's $(GO)
	cmd := exec.Command(goCmd, append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = stderr
	events, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "testsummary: %v\n", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testsummary: go test: %v (is the go command on PATH?)\n", err)
		return 2
	}
	// An interrupt reaches go test through the process group; this
	// process stays to print what ran.
	signal.Ignore(syscall.SIGINT)
	s := newSummary(stdout)
	readErr := s.read(events)
	waitErr := cmd.Wait()
	s.finish()
	switch {
	case readErr != nil:
		fmt.Fprintf(stderr, "testsummary: reading go test -json: %v\n", readErr)
		return 2
	case waitErr != nil:
		if exit, ok := waitErr.(*exec.ExitError); ok && exit.ExitCode() > 0 {
			return exit.ExitCode()
		}
		fmt.Fprintf(stderr, "testsummary: go test: %v\n", waitErr)
		return 2
	case s.failed > 0:
		// go test exited 0 with a failure in its output: never report
		// success over a failure.
		return 1
	}
	return 0
}
