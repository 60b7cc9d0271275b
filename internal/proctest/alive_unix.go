//go:build unix

package proctest

import (
	"errors"
	"syscall"
)

// alive reports whether pid exists, a zombie not yet reaped included.
func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
