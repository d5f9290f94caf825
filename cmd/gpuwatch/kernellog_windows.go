package main

import "errors"

// readKernelLogFile: Windows has no kernel log of NVRM lines.
func readKernelLogFile(string, int) ([]byte, error) {
	return nil, errors.New("no kernel log on Windows")
}
