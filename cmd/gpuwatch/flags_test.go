package main

import (
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

func TestEveryCollectorHasHelp(t *testing.T) {
	for _, g := range snapshot.AllGroups {
		if collectorHelp[g] == "" {
			t.Errorf("collector %q has no help text for --collector.%s", g, g)
		}
	}
}
