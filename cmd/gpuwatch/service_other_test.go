//go:build !windows

package main

import (
	"strings"
	"testing"
)

// Off Windows every service verb refuses, naming systemd's unit instead.
func TestServiceCommandsSayWhatToUseInstead(t *testing.T) {
	for _, verb := range []string{"install", "uninstall", "start", "stop", "status", "run"} {
		app, cmds := newApp()
		if _, err := app.Parse([]string{"service", verb}); err != nil {
			t.Fatalf("service %s: %v", verb, err)
		}
		err := serviceCmd(t, cmds, verb).run()
		if err == nil || !strings.Contains(err.Error(), "Windows only") || !strings.Contains(err.Error(), "deploy/systemd/gpuwatch.service") {
			t.Errorf("gpuwatch service %s off Windows: %v", verb, err)
		}
	}
}
