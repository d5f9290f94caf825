//go:build !windows

package smibackend

import (
	"fmt"
	"os/exec"
)

// findNvidiaSMI finds nvidia-smi on the PATH, where the driver installs it.
func findNvidiaSMI() (string, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return "", fmt.Errorf("nvidia-smi is not on the PATH (is the NVIDIA driver installed?); name it with --nvidia-smi.command: %w", err)
	}
	return path, nil
}
