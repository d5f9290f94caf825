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
// most of what an idle gpuwatch costs: an unscraped serve's CPU grows
// with its Ps, and scrapes cost less CPU and answer sooner with 2 Ps than
// with 16 (bench/RESULTS.md, "GOMAXPROCS: what an idle gpuwatch pays per
// CPU of the host", has the figures). Two rather than one (what
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
