// Command testplug is the plugin the host's tests load. It is a small,
// honest strategy and truncator, plus tool-output categories that misbehave
// on purpose so tests can reach every failure path of a real Go plugin:
//
//	spin      loops until killed
//	panic     panics inside the plugin (the SDK turns it into an error)
//	hog       allocates until the memory limit
//	callhost  returns the host model's completion of the content
//	exit      exits the process (process transport: a crash mid-call)
//	noop      answers with the request's content, untouched
//	fork      starts a child that sleeps for an hour; answers its PID
//	escape    the same, in a session of its own holding the plugin's stderr
//	logflood  logs MaxTokens lines through the host's log
//	stderrflood  prints MaxTokens lines to stderr
//	completeloop asks the host model MaxTokens times for 2e9 tokens;
//	          answers how many completions it got
//
// Built with -X main.marker=FILE, it appends a line to FILE (relative to
// its working directory) each time it starts.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -ldflags '-X main.hostile=yes' -o testplug.wasm .
// or:    go build -ldflags '-X main.hostile=yes' -o testplug .
package main

import (
	"os"

	"github.com/compact-host/compact-host/host/plugin/testdata/testplug/plug"
	"github.com/compact-host/compact-host/sdk"
)

// Set at build time with -ldflags "-X main.name=truncate -X main.hostile=yes":
// name to test a user plugin that overrides a built-in, hostile to
// declare the misbehaving categories.
var (
	name    = "testplug"
	hostile = ""
	marker  = ""
)

func main() {
	if marker != "" {
		if f, err := os.OpenFile(marker, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			f.WriteString("started\n")
			f.Close()
		}
	}
	sdk.Serve(plug.New(name, hostile != ""))
}
