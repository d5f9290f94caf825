package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// Without GOGC the collector runs at defaultGCPercent; an operator's GOGC
// is left as the runtime read it.
func TestTuneGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })

	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	tuneGC()
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("without GOGC: GC percent %d, want %d", got, defaultGCPercent)
	}

	t.Setenv("GOGC", "200")
	tuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: tuneGC changed the GC percent to %d", got)
	}
}
