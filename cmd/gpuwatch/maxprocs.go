package main

import (
	"os"
	"runtime"
)

// defaultMaxProcs caps GOMAXPROCS when GOMAXPROCS is not set. Go runs as
// many Ps as the host has CPUs (or its cgroup's CPU limit), and every
// wake-up of an idle Go process (a scrape, an accounting tick, an XID
// wait's timeout) sends a thread looking for work through every P: on a
// GPU node of 64 or more CPUs that search, not gpuwatch's own work, is
// most of what an idle gpuwatch costs. On the two-CPU VM of
// bench/RESULTS.md an unscraped dgx-h100 serve used 45 to 56 ms of CPU a
// minute with 64 Ps, 39 with 16, 16 to 26 with 2; scrapes cost less CPU
// and answered sooner with 2 Ps than with 16 too. Two rather than one (what
// node_exporter runs): a call blocked in the driver keeps its P until the
// runtime's monitor hands it on, up to 10 ms later, and the XID waiters
// call into the driver twice a second per GPU; the second P keeps a
// scrape or a tick from waiting on them.
const defaultMaxProcs = 2

// capMaxProcs lowers GOMAXPROCS to defaultMaxProcs unless the operator set
// GOMAXPROCS.
func capMaxProcs() {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	if runtime.GOMAXPROCS(0) > defaultMaxProcs {
		runtime.GOMAXPROCS(defaultMaxProcs)
	}
}
