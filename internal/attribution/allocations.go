package attribution

import (
	"context"
	"slices"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// allocationSource is an AllocationSource with the cached answers it can
// give, found once: a type assertion to an interface per source per
// Enrich is a lookup in the runtime's table, and the accounting enriches
// on every tick (--accounting.interval).
type allocationSource struct {
	AllocationSource
	cached CachedAllocationSource // nil: List only
	aged   AgedAllocationSource   // nil: no answer older than the cache's own freshness
}

func allocationSources(srcs []AllocationSource) []allocationSource {
	out := make([]allocationSource, len(srcs))
	for i, src := range srcs {
		out[i].AllocationSource = src
		out[i].cached, _ = src.(CachedAllocationSource)
		out[i].aged, _ = src.(AgedAllocationSource)
	}
	return out
}

// allocationCalls are the AllocationSource.List calls of one Enrich, and
// the answers the sources' caches gave at once.
type allocationCalls struct {
	cached  [][]snapshot.Allocation // one shared answer per source that had one
	results chan allocationResult
	n       int
}

type allocationResult struct {
	source string
	allocs []snapshot.Allocation
	err    error
}

// listAllocations asks every allocation source: from its cache when it
// can answer there (up to maxAge old where the source allows it), else
// by a List call of its own.
func (a *Attributor) listAllocations(devices []snapshot.Device, maxAge time.Duration) *allocationCalls {
	if len(a.allocations) == 0 {
		return nil
	}
	calls := &allocationCalls{}
	for _, src := range a.allocations {
		allocs, ok := src.listCached(devices, maxAge)
		if ok {
			calls.cached = append(calls.cached, allocs)
			continue
		}
		if calls.results == nil {
			// Buffered, so calls that finish after Enrich stopped
			// waiting do not leak their goroutine.
			calls.results = make(chan allocationResult, len(a.allocations))
		}
		calls.n++
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
			defer cancel()
			allocs, err := src.List(ctx, devices)
			if err != nil {
				a.errs.add(src.Source())
				a.log.Debug("allocation source failed", "source", src.Source(), "err", err)
			}
			calls.results <- allocationResult{src.Source(), allocs, err}
		}()
	}
	return calls
}

// listCached is the source's cached answer up to maxAge old (0: as fresh
// as the source keeps it), if it has one.
func (src allocationSource) listCached(devices []snapshot.Device, maxAge time.Duration) ([]snapshot.Allocation, bool) {
	switch {
	case src.aged != nil && maxAge > 0:
		return src.aged.ListCachedWithin(devices, maxAge)
	case src.cached != nil:
		return src.cached.ListCached(devices)
	}
	return nil, false
}

// cachedAllocations is every source's cached answer (nil without
// sources); ok is false when one has none: then List must be called.
func (a *Attributor) cachedAllocations(devices []snapshot.Device, maxAge time.Duration) (cached [][]snapshot.Allocation, ok bool) {
	if len(a.allocations) == 0 {
		return nil, true
	}
	cached = a.cachedParts[:0]
	for _, src := range a.allocations {
		allocs, ok := src.listCached(devices, maxAge)
		if !ok {
			return nil, false
		}
		cached = append(cached, allocs)
	}
	a.cachedParts = cached
	return cached, true
}

// addAllocations appends the allocations of calls to to, waiting for the
// List calls until ctx ends. When every source answered from its cache,
// and to is empty, it returns the same slice as the Enrich before while
// the sources' answers are the same: the snapshot then shares it, which
// snapshots allow (they are read-only once enriched), instead of a copy
// of every allocation at every tick.
func (a *Attributor) addAllocations(ctx context.Context, to []snapshot.Allocation, calls *allocationCalls) []snapshot.Allocation {
	if calls.n == 0 && len(to) == 0 {
		return a.joined.of(calls.cached)
	}
	for _, allocs := range calls.cached {
		to = append(to, allocs...)
	}
	for range calls.n {
		select {
		case r := <-calls.results:
			if r.err == nil {
				to = append(to, r.allocs...)
			}
		case <-ctx.Done():
			return to
		}
	}
	return to
}

// joinedAllocations is the concatenation of the sources' shared cached
// answers, kept while they stay the same slices.
type joinedAllocations struct {
	parts  [][]snapshot.Allocation
	joined []snapshot.Allocation
}

// of returns the concatenation of parts, the one made before when parts
// are the same slices as then. Its capacity is its length, so that an
// append to a snapshot's allocations never writes into it.
func (j *joinedAllocations) of(parts [][]snapshot.Allocation) []snapshot.Allocation {
	if j.parts != nil && sameSlices(j.parts, parts) {
		return j.joined
	}
	var joined []snapshot.Allocation
	for _, p := range parts {
		joined = append(joined, p...)
	}
	j.parts = append(j.parts[:0], parts...)
	j.joined = slices.Clip(joined)
	return j.joined
}

// sameSlices says whether a and b hold the same slices: the same memory
// and length, not merely equal elements (a source answers a new slice
// when its answer changed).
func sameSlices(a, b [][]snapshot.Allocation) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) || (len(a[i]) > 0 && &a[i][0] != &b[i][0]) {
			return false
		}
	}
	return true
}
