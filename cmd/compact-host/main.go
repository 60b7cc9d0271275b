// Command compact-host compacts LLM agent sessions. See 'compact-host --help'.
package main

import (
	"os"

	"github.com/compact-host/compact-host/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.IO{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr,
		ErrIsTerminal: isTerminal(os.Stderr),
	}))
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
