//go:build unix

package jsonl

import (
	"errors"
	"os"
	"syscall"
)

// openNonblock keeps open from waiting for a FIFO's other end; the file is
// then refused as not regular. It changes nothing for regular files.
const openNonblock = syscall.O_NONBLOCK

// tryLock takes flock(LOCK_EX) on f without waiting. flock belongs to the
// open file, not the process, so two logs open on one file in one process
// exclude each other too, and the kernel drops it when a writer dies.
func tryLock(f *os.File) (bool, error) {
	conn, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var ferr error
	if err := conn.Control(func(fd uintptr) {
		for {
			ferr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if !errors.Is(ferr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	if errors.Is(ferr, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return ferr == nil, ferr
}

func unlock(f *os.File) {
	if conn, err := f.SyscallConn(); err == nil {
		conn.Control(func(fd uintptr) { syscall.Flock(int(fd), syscall.LOCK_UN) })
	}
}
