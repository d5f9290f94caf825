package slurm

import (
	"context"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// NodeAllocations reports which Slurm job holds each GPU of one compute
// node. It is an attribution allocation source: the job is attributed its
// GPUs from the GRES index mapping even while its processes are idle.
type NodeAllocations struct {
	Lookup *JobLookup
	Node   string // this node's Slurm name
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
// is false when they cannot answer.
func (n *NodeAllocations) ListCached(devices []snapshot.Device) ([]snapshot.Allocation, bool) {
	allocs, ok := n.Lookup.CachedAllocations(n.Node)
	if !ok {
		return nil, false
	}
	return ToSnapshotAllocations(allocs, devices), true
}
