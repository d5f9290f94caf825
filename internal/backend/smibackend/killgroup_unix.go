//go:build !windows

package smibackend

import (
	"os/exec"
	"syscall"
)

// killGroup makes a cancelled run kill the command's whole process group:
// a wrapper script's nvidia-smi dies with the wrapper.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
