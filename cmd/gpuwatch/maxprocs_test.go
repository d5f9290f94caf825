package main

import (
	"runtime"
	"testing"
)

// Without GOMAXPROCS the runtime's Ps are capped at defaultMaxProcs, a
// host with fewer CPUs keeps its own count, and an operator's GOMAXPROCS
// is left as the runtime read it.
func TestCapMaxProcs(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })

	unsetEnv(t, "GOMAXPROCS")
	runtime.GOMAXPROCS(16)
	capMaxProcs()
	if got := runtime.GOMAXPROCS(0); got != defaultMaxProcs {
		t.Errorf("16 Ps, no GOMAXPROCS: %d after the cap, want %d", got, defaultMaxProcs)
	}
	runtime.GOMAXPROCS(1)
	capMaxProcs()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("1 P, no GOMAXPROCS: %d after the cap, want it kept", got)
	}

	t.Setenv("GOMAXPROCS", "16")
	runtime.GOMAXPROCS(16)
	capMaxProcs()
	if got := runtime.GOMAXPROCS(0); got != 16 {
		t.Errorf("GOMAXPROCS=16 set: capMaxProcs changed the Ps to %d", got)
	}
}
