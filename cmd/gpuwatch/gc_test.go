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

	unsetEnv(t, "GOGC")
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

// unsetEnv unsets name for the test: t.Setenv first, so that the cleanup
// puts back what the environment held.
func unsetEnv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "")
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}
