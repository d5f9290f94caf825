package attribution

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/grpcunix"
	"github.com/gpuwatch/gpuwatch/internal/kubeapi"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// DefaultKubeletPodResourcesSocket is where the kubelet serves its
// pod-resources API on every node.
const DefaultKubeletPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// PodAllocation is one device that the kubelet has given to one container,
// through a device plugin or a DRA resource claim.
type PodAllocation struct {
	// DeviceID is what the device plugin or DRA driver calls the device.
	// Device plugin: with any time-slicing replica suffix ("::N")
	// removed, a GPU UUID ("GPU-…"), a MIG UUID ("MIG-…"), or, with the
	// NVIDIA device plugin's --device-id-strategy=index, a GPU index
	// ("0") or a MIG index ("0:1"). DRA: the driver's device name
	// ("gpu-0", "gpu-0-mig-1g10gb-19-2"; see dra.go).
	DeviceID string
	// Resource is the device plugin's extended resource name, e.g.
	// "nvidia.com/gpu" or "nvidia.com/mig-1g.10gb"; empty for DRA.
	Resource string
	// Driver, Pool and Claim ("namespace/name") are set for a device
	// allocated through DRA; Driver is empty otherwise.
	Driver, Pool, Claim string
	// Pod has Name, Namespace and Container set; the pod-resources API
	// does not give the pod UID.
	Pod snapshot.Pod
}

// KubeletResolver reads GPU allocations from the kubelet pod-resources API
// (the List call of k8s.io/kubelet/pkg/apis/podresources/v1), so that a GPU
// is attributed to its pod even when the pod's processes are not visible
// (another PID namespace, or no process on the GPU yet).
//
// It implements AllocationSource. Answers are cached for ttl: allocations
// change only when pods start or stop, and the kubelet walks every pod to
// answer. After a failed call the kubelet is left alone for retryAfter, so
// that a hanging socket costs one timeout per period rather than one per
// scrape; meanwhile the last good answer is served if it is younger than
// maxStale (a kubelet restart does not make allocations flap), else
// nothing. Each failed call to the kubelet is reported once, by the call
// that made it, to be counted in gpuwatch_attribution_errors_total.
type KubeletResolver struct {
	socket     string // as configured, for error messages
	timeout    time.Duration
	ttl        time.Duration
	retryAfter time.Duration
	maxStale   time.Duration
	now        func() time.Time

	conn *grpcunix.Conn

	mu        sync.Mutex
	allocs    []PodAllocation // last good answer; shared with callers, never modified
	fetchedAt time.Time       // when allocs arrived; zero when there is none
	retryAt   time.Time       // no call before then, after a failure
	pending   *kubeletCall    // the List call in flight, if any
	fetches   uint64          // counts the good answers

	// matched is ListCached's last answer: allocs of the answer counted
	// by matchedFetch matched to the devices named by matchedTo. It
	// stands while both do (each accounting tick, many per kubelet answer,
	// would otherwise match the same answer to the same GPUs again).
	matched      []snapshot.Allocation
	matchedFetch uint64
	matchedTo    snapshot.DeviceIdentities
}

// kubeletCall is one List call, which concurrent callers share.
type kubeletCall struct {
	done   chan struct{}
	allocs []PodAllocation
	err    error
}

// Kubelet resolver defaults.
const (
	DefaultKubeletTTL = 5 * time.Second
	// kubeletRetryAfter matches the Attributor's default negative TTL.
	kubeletRetryAfter = 30 * time.Second
	// kubeletMaxMessageBytes is what the kubelet's own pod-resources
	// client accepts; a node with hundreds of pods exceeds gRPC's 4 MiB.
	kubeletMaxMessageBytes = 16 << 20
)

// NewKubeletResolver returns a resolver for the pod-resources API at
// socket, a path or "unix:///path". timeout bounds each List call, the
// connection included (default 1s); ttl is how long an answer is reused
// (default DefaultKubeletTTL). Nothing is dialled until the first call,
// so an absent socket is not an error here: the kubelet may start later.
func NewKubeletResolver(socket string, timeout, ttl time.Duration) (*KubeletResolver, error) {
	if timeout <= 0 {
		timeout = time.Second
	}
	if ttl <= 0 {
		ttl = DefaultKubeletTTL
	}
	conn, err := dialUnixGRPC("--kubelet.pod-resources-socket", socket, kubeletMaxMessageBytes)
	if err != nil {
		return nil, err
	}
	return &KubeletResolver{
		socket:     socket,
		timeout:    timeout,
		ttl:        ttl,
		retryAfter: kubeletRetryAfter,
		maxStale:   2 * kubeletRetryAfter,
		now:        time.Now,
		conn:       conn,
	}, nil
}

// Close releases the connection. Calls after Close fail.
func (k *KubeletResolver) Close() error { return k.conn.Close() }

// Source implements AllocationSource.
func (k *KubeletResolver) Source() string { return SourceKubelet }

// List implements AllocationSource: the current GPU allocations, matched to
// the snapshot's devices by MatchAllocations.
func (k *KubeletResolver) List(ctx context.Context, devices []snapshot.Device) ([]snapshot.Allocation, error) {
	allocs, err := k.Allocations(ctx)
	if err != nil {
		return nil, err
	}
	return MatchAllocations(allocs, devices), nil
}

// ListCached is List answered from the cache alone, when it is fresh:
// no call to the kubelet and no waiting (CachedAllocationSource).
// The answer is shared: do not modify it.
func (k *KubeletResolver) ListCached(devices []snapshot.Device) ([]snapshot.Allocation, bool) {
	return k.ListCachedWithin(devices, 0)
}

// ListCachedWithin is ListCached taking an answer up to maxAge old too,
// when that is longer than the cache's own time to live
// (AgedAllocationSource).
func (k *KubeletResolver) ListCachedWithin(devices []snapshot.Device, maxAge time.Duration) ([]snapshot.Allocation, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fetchedAt.IsZero() || k.now().Sub(k.fetchedAt) >= max(k.ttl, maxAge) {
		return nil, false
	}
	if k.matchedFetch != k.fetches || !k.matchedTo.Same(devices) {
		k.matched, k.matchedFetch = MatchAllocations(k.allocs, devices), k.fetches
		k.matchedTo.Set(devices)
	}
	return k.matched, true
}

// Allocations returns every GPU and MIG device that the kubelet has
// allocated to a container, from the cache when it is fresh. The returned
// slice is shared: do not modify it. An error wraps ErrUnavailable.
func (k *KubeletResolver) Allocations(ctx context.Context) ([]PodAllocation, error) {
	k.mu.Lock()
	now := k.now()
	if !k.fetchedAt.IsZero() && now.Sub(k.fetchedAt) < k.ttl {
		allocs := k.allocs
		k.mu.Unlock()
		return allocs, nil
	}
	if now.Before(k.retryAt) {
		// Failed recently, and that failure was reported.
		allocs := k.staleLocked(now)
		k.mu.Unlock()
		return allocs, nil
	}
	call := k.pending
	if call == nil {
		call = &kubeletCall{done: make(chan struct{})}
		k.pending = call
		go k.fetch(call)
	}
	k.mu.Unlock()

	select {
	case <-call.done:
		return call.allocs, call.err
	case <-ctx.Done():
		// The call goes on, bounded by its own timeout, and serves
		// the next caller.
		return nil, fmt.Errorf("kubelet pod-resources API %s: %w: %w", k.socket, ErrUnavailable, ctx.Err())
	}
}

// staleLocked is the last good answer if it is recent enough to stand in
// while the kubelet is unreachable.
func (k *KubeletResolver) staleLocked(now time.Time) []PodAllocation {
	if k.fetchedAt.IsZero() || now.Sub(k.fetchedAt) >= k.maxStale {
		return nil
	}
	return k.allocs
}

// fetch makes one List call under its own timeout, not a caller's
// context: a caller that stops waiting does not waste the call.
func (k *KubeletResolver) fetch(call *kubeletCall) {
	ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
	resp, err := k.conn.Invoke(ctx, kubeapi.MethodList, nil)
	cancel()
	var pods []kubeapi.PodResources
	if err == nil {
		pods, err = kubeapi.DecodeListPodResourcesResponse(resp)
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	if err != nil {
		call.err = fmt.Errorf("kubelet pod-resources API %s: List: %w", k.socket, grpcFailure(err))
		call.allocs = nil
		k.retryAt = now.Add(k.retryAfter)
	} else {
		call.allocs = gpuAllocations(pods)
		k.allocs, k.fetchedAt, k.retryAt = call.allocs, now, time.Time{}
		k.fetches++
	}
	k.pending = nil
	close(call.done)
}

// isGPUResource reports whether the extended resource is an NVIDIA GPU or
// MIG device: "nvidia.com/gpu", "nvidia.com/mig-<profile>", and the
// ".shared" names the device plugin gives them when time-slicing is
// configured with renameByDefault.
func isGPUResource(name string) bool {
	return name == "nvidia.com/gpu" ||
		strings.HasPrefix(name, "nvidia.com/gpu.") ||
		strings.HasPrefix(name, "nvidia.com/mig-")
}

// gpuAllocations keeps the GPU devices of a List answer, of device plugins
// and of NVIDIA's DRA driver, one entry per (container, device):
// time-sliced replicas of one GPU given to the same container
// ("GPU-x::0", "GPU-x::3") are one allocation.
func gpuAllocations(pods []kubeapi.PodResources) []PodAllocation {
	var out []PodAllocation
	type key struct{ ns, pod, container, driver, device string }
	seen := make(map[key]struct{})
	add := func(a PodAllocation) bool {
		k := key{a.Pod.Namespace, a.Pod.Name, a.Pod.Container, a.Driver, a.DeviceID}
		if _, dup := seen[k]; dup {
			return false
		}
		seen[k] = struct{}{}
		return true
	}
	for _, pr := range pods {
		for _, c := range pr.Containers {
			for _, dev := range c.Devices {
				if !isGPUResource(dev.ResourceName) {
					continue
				}
				for _, id := range dev.DeviceIDs {
					id = stripReplica(id)
					if id == "" {
						continue
					}
					a := PodAllocation{
						DeviceID: id,
						Resource: dev.ResourceName,
						Pod:      snapshot.Pod{Name: pr.Name, Namespace: pr.Namespace, Container: c.Name},
					}
					if add(a) {
						out = append(out, a)
					}
				}
			}
			out = draGPUAllocations(out, &pr, &c, add)
		}
	}
	return out
}

// stripReplica removes the time-slicing suffix the NVIDIA device plugin
// appends to a shared device's id: "GPU-<uuid>::<replica>".
func stripReplica(id string) string {
	if base, _, ok := strings.Cut(id, "::"); ok {
		return base
	}
	return id
}

// MatchAllocations turns the kubelet's allocations into the snapshot's,
// finding each device among devices:
//   - "GPU-…": the GPU with that UUID;
//   - "MIG-…": the GPU whose MIGInstances has that UUID; the old form
//     "MIG-GPU-<uuid>/<gi>/<ci>" (drivers before R470) names its parent;
//   - "N" or "N:M" (device plugin index strategy): the GPU with index N;
//     which MIG instance "N:M" is cannot be told, so MIGUUID stays empty;
//   - a device of NVIDIA's DRA driver: the GPU with that minor number, and
//     for a MIG device the instance with that placement (see dra.go); the
//     parent GPU alone when the instance cannot be told.
//
// Allocations of devices not in the snapshot (a GPU that is down and
// unnamed, a stale kubelet answer) are left out. The result is sorted by
// GPU, MIG UUID, namespace, pod and container, and has no duplicates.
func MatchAllocations(allocs []PodAllocation, devices []snapshot.Device) []snapshot.Allocation {
	if len(allocs) == 0 {
		return nil
	}
	type gpuRef struct {
		index int
		uuid  string
	}
	byUUID := make(map[string]gpuRef, len(devices))
	byIndex := make(map[int]gpuRef, len(devices))
	byMinor := make(map[int]*snapshot.Device, len(devices))
	migParent := make(map[string]gpuRef)
	for i := range devices {
		d := &devices[i]
		ref := gpuRef{d.Index, d.UUID}
		byIndex[d.Index] = ref
		if d.UUID != "" {
			byUUID[d.UUID] = ref
		}
		if minor, ok := d.Info.MinorNumber.Get(); ok {
			byMinor[minor] = d
		}
		for _, mig := range d.MIGInstances {
			if mig.UUID != "" {
				migParent[mig.UUID] = ref
			}
		}
	}

	out := make([]snapshot.Allocation, 0, len(allocs))
	for _, a := range allocs {
		if a.Driver != "" {
			out = appendDRAAllocation(out, a, byMinor)
			continue
		}
		var ref gpuRef
		var found bool
		migUUID := ""
		switch id := a.DeviceID; {
		case strings.HasPrefix(id, "GPU-"):
			ref, found = byUUID[id]
		case strings.HasPrefix(id, "MIG-"):
			migUUID = id
			ref, found = migParent[id]
			if !found {
				if parent, _, ok := strings.Cut(strings.TrimPrefix(id, "MIG-"), "/"); ok && strings.HasPrefix(parent, "GPU-") {
					ref, found = byUUID[parent]
				}
			}
		default:
			gpu, _, _ := strings.Cut(id, ":")
			if n, err := strconv.Atoi(gpu); err == nil {
				ref, found = byIndex[n]
			}
		}
		if !found {
			continue
		}
		out = append(out, snapshot.Allocation{GPU: ref.index, GPUUUID: ref.uuid, MIGUUID: migUUID, Pod: a.Pod})
	}
	slices.SortFunc(out, compareAllocations)
	// Two time-sliced replicas named by index, or a MIG UUID and its
	// index form, can land on the same allocation.
	return slices.Compact(out)
}

// appendDRAAllocation appends what DRA allocation a holds, found by the
// GPU's minor number, or nothing when its device is not one of devices.
func appendDRAAllocation(out []snapshot.Allocation, a PodAllocation, byMinor map[int]*snapshot.Device) []snapshot.Allocation {
	name, ok := parseDRADeviceName(a.DeviceID)
	if !ok {
		return out
	}
	dev, ok := byMinor[name.minor]
	if !ok {
		return out
	}
	parent := snapshot.Allocation{GPU: dev.Index, GPUUUID: dev.UUID, Pod: a.Pod}
	if !name.mig {
		return append(out, parent)
	}
	instances := draMIGInstances(dev, name)
	if len(instances) == 0 {
		return append(out, parent)
	}
	for _, m := range instances {
		alloc := parent
		alloc.MIGUUID = m.UUID
		out = append(out, alloc)
	}
	return out
}

func compareAllocations(x, y snapshot.Allocation) int {
	if c := cmp.Compare(x.GPU, y.GPU); c != 0 {
		return c
	}
	if c := strings.Compare(x.MIGUUID, y.MIGUUID); c != 0 {
		return c
	}
	if c := strings.Compare(x.Pod.Namespace, y.Pod.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(x.Pod.Name, y.Pod.Name); c != 0 {
		return c
	}
	return strings.Compare(x.Pod.Container, y.Pod.Container)
}

// --- gRPC over a unix socket, shared with cri.go -----------------------

// DetectSocket returns the first of paths that is a unix socket now, or ""
// when none is. It lets a socket flag default to "wherever the runtime
// put it on this node", so that a node without Kubernetes counts no
// errors for a source it does not have.
func DetectSocket(paths ...string) string {
	for _, p := range paths {
		if fi, err := os.Stat(strings.TrimPrefix(p, "unix://")); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return p
		}
	}
	return ""
}

// dialUnixGRPC prepares a gRPC client for a unix socket given as a path or
// "unix:///path"; flag names the setting in errors. Nothing is dialled: the
// first call does, and every call is bounded by its context, so an absent
// socket fails that call at once and a socket that accepts but never
// completes the HTTP/2 handshake fails it at its deadline. A lost
// connection is redialled by the next call, so a restarted kubelet or
// runtime is seen at once.
func dialUnixGRPC(flag, socket string, maxRecvBytes int) (*grpcunix.Conn, error) {
	path := strings.TrimPrefix(socket, "unix://")
	if path == "" || !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%s %q: want an absolute socket path or unix:///path", flag, socket)
	}
	return grpcunix.New(path, maxRecvBytes), nil
}

// grpcFailure marks err as ErrUnavailable when it is a failure of the
// service itself (unreachable, too slow, refusing us, not implementing the
// API) rather than an answer about the thing asked for (not found).
func grpcFailure(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	switch grpcunix.CodeOf(err) {
	case grpcunix.Unavailable, grpcunix.DeadlineExceeded, grpcunix.Canceled,
		grpcunix.Unimplemented, grpcunix.PermissionDenied, grpcunix.Unauthenticated:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
