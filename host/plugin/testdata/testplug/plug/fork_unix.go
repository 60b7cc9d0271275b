//go:build unix

package plug

import "os/exec"

// forkSleeper starts a child that outlives nothing: the host must kill it
// with the plugin.
func forkSleeper() (int, error) {
	cmd := exec.Command("sleep", "3600")
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}
