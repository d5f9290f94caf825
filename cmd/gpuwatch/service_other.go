//go:build !windows

package main

import (
	"fmt"
	"runtime"
)

// run refuses: a Windows service needs Windows' service manager.
func (c *serviceCommand) run() error {
	return fmt.Errorf("gpuwatch service %s: Windows services exist on Windows only; on %s run gpuwatch serve under systemd "+
		"(deploy/systemd/gpuwatch.service, which the .deb and .rpm packages install: systemctl enable --now gpuwatch; see docs/install.md)",
		c.verb, runtime.GOOS)
}
