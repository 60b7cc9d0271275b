package procrt

import (
	"log/slog"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// setProcessGroup starts the plugin in a process group of its own, so
// that killGroup reaches the children it starts as well.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills every process of the group pgid; 0 is no group.
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

var protectOnce sync.Once

// protectHost makes the host process not dumpable before it starts its
// first plugin process. A process plugin runs as the host's user, and
// /proc/<host pid>/environ (the provider API keys), mem and maps of a
// dumpable process are readable by any process of that user; not of one
// that is not dumpable. It also keeps core dumps, which hold the keys,
// from being written. Root reads them anyway: see README, Trust model.
func protectHost(logger *slog.Logger) {
	protectOnce.Do(func() {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			logger.Warn("could not make the host process undumpable; process plugins can read its environment", "err", err)
		}
	})
}

// hostDumpable reports the host's dumpable flag.
func hostDumpable() (bool, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return v != 0, err
}
