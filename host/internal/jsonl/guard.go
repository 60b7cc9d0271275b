package jsonl

import (
	"os"
	"time"
)

// LockFile takes the exclusive lock every Log writer takes on f, waiting
// at most timeout (DefaultLockTimeout when 0), so a program that appends
// to a file it did not open as a Log still excludes the Log writers and
// each other. path names the file in the error.
func LockFile(f *os.File, path string, timeout time.Duration) error {
	l := &Log{f: f, path: path, opts: Options{LockTimeout: timeout}}
	return l.lock()
}

// UnlockFile releases the lock LockFile took.
func UnlockFile(f *os.File) { unlock(f) }

// OpenNonblock is the flag Open and Read add so that opening a FIFO never
// waits for its other end.
const OpenNonblock = openNonblock
