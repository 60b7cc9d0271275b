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
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -ldflags '-X main.hostile=yes' -o testplug.wasm .
// or:    go build -ldflags '-X main.hostile=yes' -o testplug .
package main

import (
	"github.com/compact-host/compact-host/host/plugin/testdata/testplug/plug"
	"github.com/compact-host/compact-host/sdk"
)

// Set at build time with -ldflags "-X main.name=truncate -X main.hostile=yes":
// name to test a user plugin that overrides a built-in, hostile to
// declare the misbehaving categories.
var (
	name    = "testplug"
	hostile = ""
)

func main() { sdk.Serve(plug.New(name, hostile != "")) }
