//go:build unix

package plug

import (
	"os"
	"os/exec"
	"syscall"
)

// forkSleeper starts a child that outlives nothing: the host must kill it
// with the plugin.
func forkSleeper() (int, error) {
	cmd := exec.Command("sleep", "3600")
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// escapeSleeper starts a child in a session of its own, out of the
// plugin's process group, holding the plugin's stderr open.
func escapeSleeper() (int, error) {
	cmd := exec.Command("sleep", "3600")
	cmd.Stderr = os.NewFile(2, "stderr")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}
