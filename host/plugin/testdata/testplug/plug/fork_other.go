//go:build !unix

package plug

import "github.com/compact-host/compact-host/abi"

func forkSleeper() (int, error) {
	return 0, abi.Errorf(abi.CodeUnsupported, "no processes here")
}

func escapeSleeper() (int, error) { return forkSleeper() }
