// Command compact-host compacts LLM agent sessions. See 'compact-host --help'.
package main

import (
	"os"

	"github.com/compact-host/compact-host/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.IO{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr,
		ErrIsTerminal: cli.IsTerminal(os.Stderr),
	}))
}
