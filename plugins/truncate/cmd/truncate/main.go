// Command truncate is the truncate plugin (digest strategy and output
// truncators): a wasm module when built with GOOS=wasip1 GOARCH=wasm
// -buildmode=c-shared, a process plugin otherwise.
package main

import (
	"github.com/compact-host/compact-host/plugins/truncate"
	"github.com/compact-host/compact-host/sdk"
)

func main() { sdk.Serve(truncate.New()) }
