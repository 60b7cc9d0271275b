// Command narrative is the narrative strategy as a plugin: a wasm module
// when built with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared, a process
// plugin otherwise.
package main

import (
	"github.com/compact-host/compact-host/plugins/narrative"
	"github.com/compact-host/compact-host/sdk"
)

func main() { sdk.Serve(narrative.New()) }
