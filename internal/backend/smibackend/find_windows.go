package smibackend

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// findNvidiaSMI finds nvidia-smi.exe on the PATH, else where the driver
// installs it: System32 for DCH drivers, NVSMI under Program Files for
// older ones.
func findNvidiaSMI() (string, error) {
	if path, err := exec.LookPath("nvidia-smi.exe"); err == nil {
		return path, nil
	}
	var tried []string
	for _, dir := range []string{
		filepath.Join(os.Getenv("SystemRoot"), "System32"),
		filepath.Join(os.Getenv("ProgramFiles"), "NVIDIA Corporation", "NVSMI"),
	} {
		path := filepath.Join(dir, "nvidia-smi.exe")
		tried = append(tried, path)
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
			return path, nil
		}
	}
	return "", fmt.Errorf("nvidia-smi.exe is neither on the PATH nor in %v (is the NVIDIA driver installed?); name it with --nvidia-smi.command", tried)
}
