//go:build !unix

package proctest

import "os"

// alive reports whether pid exists; elsewhere than Unix, FindProcess
// opens the process and fails once it is gone.
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
