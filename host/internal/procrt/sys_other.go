//go:build !linux

package procrt

import (
	"log/slog"
	"os/exec"
)

// Elsewhere than Linux the plugin runs in the host's process group and
// only the plugin itself is killed; /proc is not there to protect.
func setProcessGroup(*exec.Cmd)   {}
func killGroup(int)               {}
func protectHost(*slog.Logger)    {}
func hostDumpable() (bool, error) { return true, nil }
