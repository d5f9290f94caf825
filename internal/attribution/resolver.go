package attribution

import (
	"context"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// ContainerMeta is what a container runtime says about one container.
type ContainerMeta struct {
	Name           string
	Image          string
	ComposeProject string
	ComposeService string
	// Kubernetes identity, from the io.kubernetes.* labels that the CRI
	// runtimes (and cri-dockerd, and podman kube play) put on containers.
	PodName      string
	PodNamespace string
	PodContainer string
}

// ContainerResolver looks up container metadata from one runtime API. The
// Attributor caches its answers per container id, bounds each call by
// Options.Timeout and runs calls for different containers concurrently, so
// an implementation need do none of that itself.
//
// Implementations: the Docker Engine API (docker.go, which Podman's
// compatibility API also serves) and the CRI runtime service (cri.go).
type ContainerResolver interface {
	// Source names the resolver in AttributionErrors: "docker", "cri".
	Source() string
	// Handles reports whether containers of this runtime (a Runtime*
	// constant from ParseCgroup) are asked of this resolver.
	Handles(runtime string) bool
	// Resolve looks up one container by its full id. A failure of the
	// API itself (socket absent, refused, no answer) should wrap
	// ErrUnavailable so that the Attributor backs off from the source
	// instead of paying a timeout per container.
	Resolve(ctx context.Context, containerID string) (ContainerMeta, error)
}

// AllocationSource lists the workloads that hold GPUs whether or not their
// processes are visible, such as the kubelet pod-resources API (kubelet.go).
// The Attributor calls List once per Enrich, under Options.Timeout, and
// stores the result in Snapshot.Allocations.
type AllocationSource interface {
	// Source names the source in AttributionErrors: "kubelet".
	Source() string
	// List returns the current allocations. Device ids are matched to
	// the snapshot's GPUs by the source, which receives the snapshot's
	// devices for that.
	List(ctx context.Context, devices []snapshot.Device) ([]snapshot.Allocation, error)
}

// CachedAllocationSource is an AllocationSource that can often answer
// from its cache: ListCached returns what List would, without calling out
// or waiting, or ok false when its cache cannot answer. Its answer may be
// shared from one call to the next: do not modify it. The Attributor
// asks it first, and calls List (on a goroutine of its own, under
// Options.Timeout) only when it cannot: the accounting enriches a
// snapshot on every tick (--accounting.interval), and a goroutine per
// source per Enrich was a good part of what a tick cost.
type CachedAllocationSource interface {
	AllocationSource
	ListCached(devices []snapshot.Device) (allocs []snapshot.Allocation, ok bool)
}

// AgedAllocationSource is a CachedAllocationSource that can also answer
// from a cache older than its own freshness, up to maxAge: what an
// Attributor's WithAllocationMaxAge view asks it.
type AgedAllocationSource interface {
	CachedAllocationSource
	ListCachedWithin(devices []snapshot.Device, maxAge time.Duration) (allocs []snapshot.Allocation, ok bool)
}

// SlurmLookup resolves a Slurm job id to the job's user, account,
// partition and name. internal/slurm provides it; the Attributor caches
// its answers per job id and bounds each call by Options.Timeout.
type SlurmLookup func(ctx context.Context, jobID string) (snapshot.SlurmJob, error)
