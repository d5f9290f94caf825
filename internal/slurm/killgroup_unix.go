//go:build !windows

package slurm

import (
	"os/exec"
	"syscall"
)

// ownGroup gives the command its own process group: on timeout the group
// is killed, so that a wrapper script and its children (ssh, sleep, ...)
// all go.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// killGroup kills whatever the command left behind in its group (a
// wrapper's background child, a writer stopped by the output cap).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
