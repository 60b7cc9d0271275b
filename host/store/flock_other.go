//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import (
	"errors"
	"os"
)

var errNoFlock = errors.New("store: the disk store needs flock, which this system lacks: use a redis:// store")

func flockSupported() error           { return errNoFlock }
func flockTry(*os.File) (bool, error) { return false, errNoFlock }
func flockRelease(*os.File)           {}
