package slurm

import "os/exec"

// ownGroup leaves the default, killing the command itself on timeout:
// Windows has no process groups to signal (Slurm's commands run on Linux;
// this keeps the package building for the Windows binary).
func ownGroup(*exec.Cmd) {}

// killGroup has no group to kill.
func killGroup(*exec.Cmd) {}
