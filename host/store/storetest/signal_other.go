//go:build !unix

package storetest

import "os"

// Without SIGSTOP a test cannot freeze the server; Stop kills it instead.
var sigStop, sigCont os.Signal = os.Kill, os.Interrupt
