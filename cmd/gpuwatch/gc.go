package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the garbage collector's target when GOGC is not set.
// Go's default (100) lets the heap grow to twice what is live between
// collections; an exporter's live heap is small and its allocation comes
// in one burst per scrape, so that doubling is most of its anonymous
// memory, on every GPU node. A lower target trades a little CPU per
// scrape for it (bench/RESULTS.md, "Peak memory").
const defaultGCPercent = 50

// tuneGC sets the collector's target unless the operator set GOGC.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}
