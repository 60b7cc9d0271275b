//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package store

import (
	"errors"
	"os"
	"syscall"
)

func flockSupported() error { return nil }

// flockTry takes an exclusive flock on f without blocking. A flock belongs
// to the open file, so two Disk values in one process exclude each other
// as two processes do.
func flockTry(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		default:
			return false, err
		}
	}
}

func flockRelease(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
