// Command structured is the structured strategy as a plugin: a wasm module
// when built with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared, a process
// plugin otherwise.
package main

import (
	"github.com/compact-host/compact-host/plugins/structured"
	"github.com/compact-host/compact-host/sdk"
)

func main() { sdk.Serve(structured.New()) }
