//go:build !unix

package cli

import (
	"errors"
	"os"
)

const openNonblock = 0

// tryFileLock fails where flock does not exist; waitForLock then leaves
// the lock to the write.
func tryFileLock(*os.File) (bool, error) { return false, errors.New("no flock") }

func unlockFile(*os.File) {}

func lockHolder(*os.File) string { return "another program" }
