//go:build unix

package storetest

import "syscall"

const sigStop, sigCont = syscall.SIGSTOP, syscall.SIGCONT
