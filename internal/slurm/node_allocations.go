package slurm

import (
	"context"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// NodeAllocations reports which Slurm job holds each GPU of one compute
// node. It is an attribution allocation source: the job is attributed its
// GPUs from the GRES index mapping even while its processes are idle.
type NodeAllocations struct {
	Lookup *JobLookup
	Node   string // this node's Slurm name

	// matched is ListCached's last answer: the lookup's cached answer of
	// version matchedVersion, matched to the devices named by matchedTo.
	// It stands while both do (each accounting tick would otherwise build
	// and match the same answer again).
	mu             sync.Mutex
	matched        []snapshot.Allocation
	matchedVersion CacheVersion
	matchedTo      snapshot.DeviceIdentities
	// stands says matched stands, without asking the lookup's caches,
	// while their Changes are standsAt and until standsUntil: asking them
	// (a lock and a clock read per running job) was most of what a tick
	// spent on allocations.
	stands      bool
	standsAt    uint64
	standsUntil time.Time
}

// Source names the source in gpuwatch_attribution_errors_total.
func (n *NodeAllocations) Source() string { return "slurm" }

// List returns the node's GPU allocations mapped onto the snapshot's devices.
func (n *NodeAllocations) List(ctx context.Context, devices []snapshot.Device) ([]snapshot.Allocation, error) {
	allocs, err := n.Lookup.Allocations(ctx, n.Node)
	if err != nil {
		return nil, err
	}
	return ToSnapshotAllocations(allocs, devices), nil
}

// ListCached is List answered from the lookup's caches alone, without
// running a command or waiting (attribution.CachedAllocationSource); ok
// is false when they cannot answer. The answer is shared: do not modify it.
func (n *NodeAllocations) ListCached(devices []snapshot.Device) ([]snapshot.Allocation, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	changes := n.Lookup.changeCount()
	if n.stands && changes == n.standsAt && n.Lookup.opts.Now().Before(n.standsUntil) && n.matchedTo.Same(devices) {
		return n.matched, true
	}
	n.stands = false
	version, until, ok := n.Lookup.cachedVersionUntil(n.Node)
	if !ok {
		return nil, false
	}
	if version != n.matchedVersion || !n.matchedTo.Same(devices) {
		// The version read before the answer: a change in between makes
		// the next call build it again, never keep an older one.
		allocs, _, ok := n.Lookup.CachedAllocations(n.Node)
		if !ok {
			return nil, false
		}
		n.matched, n.matchedVersion = ToSnapshotAllocations(allocs, devices), version
		n.matchedTo.Set(devices)
	}
	n.stands, n.standsAt, n.standsUntil = true, changes, until
	return n.matched, true
}
