package attribution

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// Device ids of testdata/k8s/podresources-list.json.
const (
	uuidTrainerA = "GPU-8d5e2b1c-3f4a-4b6c-9d7e-1a2b3c4d5e6f"
	uuidTrainerB = "GPU-0b1c2d3e-4f5a-4b6c-8d9e-0f1a2b3c4d5e"
	uuidShared   = "GPU-3f2e1d0c-9b8a-4f7e-8d6c-5b4a39281706"
	uuidMIGHost  = "GPU-7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d"
	migServer    = "MIG-5c3a6e1f-7b2d-5a4e-9c8f-2d1e0f3a4b5c"
	migWorker    = "MIG-9e8d7c6b-5a4f-5e3d-8c2b-1a0f9e8d7c6b"
	oddPodName   = "notebook-\"x\"\nü"
	oddNamespace = "team-🚀"
)

// fakeKubelet serves the pod-resources List call, like the kubelet.
type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	calls atomic.Int64

	mu    sync.Mutex
	resp  *podresourcesv1.ListPodResourcesResponse
	delay time.Duration
	err   error
}

func (f *fakeKubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	f.calls.Add(1)
	f.mu.Lock()
	resp, delay, err := f.resp, f.delay, f.err
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (f *fakeKubelet) set(resp *podresourcesv1.ListPodResourcesResponse, delay time.Duration, err error) {
	f.mu.Lock()
	f.resp, f.delay, f.err = resp, delay, err
	f.mu.Unlock()
}

// loadListFixture reads a List answer written in the API's JSON mapping.
func loadListFixture(t testing.TB) *podresourcesv1.ListPodResourcesResponse {
	t.Helper()
	return loadListFixtureFile(t, "testdata/k8s/podresources-list.json")
}

func loadListFixtureFile(t testing.TB, path string) *podresourcesv1.ListPodResourcesResponse {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var resp podresourcesv1.ListPodResourcesResponse
	if err := protojson.Unmarshal(b, &resp); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &resp
}

// serveGRPC starts a gRPC server on a temporary unix socket and returns
// the socket's path and the server, which the test's cleanup stops.
func serveGRPC(t testing.TB, register func(*grpc.Server)) (string, *grpc.Server) {
	t.Helper()
	socket := filepath.Join(shortTempDir(t), "grpc.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return socket, srv
}

func newFakeKubelet(t testing.TB, resp *podresourcesv1.ListPodResourcesResponse) (*fakeKubelet, string, *grpc.Server) {
	t.Helper()
	fk := &fakeKubelet{resp: resp}
	socket, srv := serveGRPC(t, func(s *grpc.Server) { podresourcesv1.RegisterPodResourcesListerServer(s, fk) })
	return fk, socket, srv
}

// silentSocket is a unix socket that accepts connections and never says
// anything, so that a gRPC client's HTTP/2 handshake never completes.
func silentSocket(t testing.TB) (socket string, accepted *atomic.Int64) {
	t.Helper()
	socket = filepath.Join(shortTempDir(t), "silent.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int64)
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() { <-done; c.Close() }()
		}
	}()
	return socket, accepted
}

func newKubelet(t testing.TB, socket string, timeout, ttl time.Duration) *KubeletResolver {
	t.Helper()
	k, err := NewKubeletResolver(socket, timeout, ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

func podAlloc(id, resource, ns, name, container string) PodAllocation {
	return PodAllocation{DeviceID: id, Resource: resource, Pod: snapshot.Pod{Name: name, Namespace: ns, Container: container}}
}

func TestKubeletAllocations(t *testing.T) {
	_, socket, _ := newFakeKubelet(t, loadListFixture(t))
	k := newKubelet(t, "unix://"+socket, time.Second, time.Minute)

	got, err := k.Allocations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []PodAllocation{
		// Two GPUs for one container; the FPGA, CPUs and memory are not GPUs.
		podAlloc(uuidTrainerA, "nvidia.com/gpu", "ml", "trainer-0", "main"),
		podAlloc(uuidTrainerB, "nvidia.com/gpu", "ml", "trainer-0", "main"),
		// Two containers of one pod, each with a MIG device; the
		// time-slicing suffix is stripped.
		podAlloc(migServer, "nvidia.com/mig-1g.10gb", "serving", "inference-7f9c", "server"),
		podAlloc(migWorker, "nvidia.com/mig-3g.40gb", "serving", "inference-7f9c", "worker"),
		// Two replicas of one time-sliced GPU are one allocation; odd
		// names pass through unchanged.
		podAlloc(uuidShared, "nvidia.com/gpu", oddNamespace, oddPodName, "jupyter"),
		// The renamed time-slicing resource.
		podAlloc(uuidShared, "nvidia.com/gpu.shared", "ml", "shared-renamed", "main"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("allocations:\n got %+v\nwant %+v", got, want)
	}
}

func TestIsGPUResource(t *testing.T) {
	for name, want := range map[string]bool{
		"nvidia.com/gpu": true, "nvidia.com/gpu.shared": true,
		"nvidia.com/mig-1g.10gb": true, "nvidia.com/mig-7g.80gb.shared": true,
		"nvidia.com/gpumem": false, "nvidia.com/gpucores": false, "amd.com/gpu": false,
		"cpu": false, "": false, "example.com/nvidia.com/gpu": false,
	} {
		if got := isGPUResource(name); got != want {
			t.Errorf("isGPUResource(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestMatchAllocations(t *testing.T) {
	devices := []snapshot.Device{
		{Index: 0, UUID: uuidTrainerA, Up: true},
		{Index: 1, UUID: uuidTrainerB, Up: true},
		{Index: 2, UUID: uuidShared, Up: true},
		{Index: 3, UUID: uuidMIGHost, Up: true, MIGInstances: []snapshot.MIGInstance{
			{GPUInstanceID: 7, ComputeInstanceID: 0, UUID: migServer, Profile: "1g.10gb"},
			{GPUInstanceID: 2, ComputeInstanceID: 0, UUID: migWorker, Profile: "3g.40gb"},
		}},
	}
	pod := func(ns, name, c string) snapshot.Pod { return snapshot.Pod{Namespace: ns, Name: name, Container: c} }
	allocs := []PodAllocation{
		podAlloc(migWorker, "nvidia.com/mig-3g.40gb", "serving", "inf", "worker"),
		podAlloc(uuidTrainerB, "nvidia.com/gpu", "ml", "trainer", "main"),
		podAlloc(uuidTrainerA, "nvidia.com/gpu", "ml", "trainer", "main"),
		podAlloc(migServer, "nvidia.com/mig-1g.10gb", "serving", "inf", "server"),
		// Old MIG UUID form, naming its parent GPU.
		podAlloc("MIG-"+uuidTrainerB+"/1/0", "nvidia.com/mig-1g.5gb", "old", "legacy", "c"),
		// Index strategy: a GPU, and a MIG device (parent known, instance not).
		podAlloc("2", "nvidia.com/gpu", "idx", "by-index", "c"),
		podAlloc("3:1", "nvidia.com/mig-1g.10gb", "idx", "mig-by-index", "c"),
		// The same allocation twice (index and UUID forms of one GPU).
		podAlloc(uuidShared, "nvidia.com/gpu", "idx", "by-index", "c"),
		// Not on this host.
		podAlloc("GPU-00000000-0000-0000-0000-000000000000", "nvidia.com/gpu", "x", "elsewhere", "c"),
		podAlloc("MIG-00000000-0000-0000-0000-000000000000", "nvidia.com/mig-1g.10gb", "x", "elsewhere", "c"),
		podAlloc("MIG-GPU-00000000-0000-0000-0000-000000000000/1/0", "nvidia.com/mig-1g.10gb", "x", "elsewhere", "c"),
		podAlloc("9", "nvidia.com/gpu", "x", "elsewhere", "c"),
		podAlloc("garbage", "nvidia.com/gpu", "x", "elsewhere", "c"),
	}
	got := MatchAllocations(allocs, devices)
	// Sorted by GPU, then MIG UUID ("" first), then namespace, pod, container.
	want := []snapshot.Allocation{
		{GPU: 0, GPUUUID: uuidTrainerA, Pod: pod("ml", "trainer", "main")},
		{GPU: 1, GPUUUID: uuidTrainerB, Pod: pod("ml", "trainer", "main")},
		{GPU: 1, GPUUUID: uuidTrainerB, MIGUUID: "MIG-" + uuidTrainerB + "/1/0", Pod: pod("old", "legacy", "c")},
		{GPU: 2, GPUUUID: uuidShared, Pod: pod("idx", "by-index", "c")},
		{GPU: 3, GPUUUID: uuidMIGHost, Pod: pod("idx", "mig-by-index", "c")},
		{GPU: 3, GPUUUID: uuidMIGHost, MIGUUID: migServer, Pod: pod("serving", "inf", "server")},
		{GPU: 3, GPUUUID: uuidMIGHost, MIGUUID: migWorker, Pod: pod("serving", "inf", "worker")},
	}
	if !slices.Equal(got, want) {
		t.Errorf("MatchAllocations:\n got %+v\nwant %+v", got, want)
	}

	if got := MatchAllocations(nil, devices); got != nil {
		t.Errorf("no allocations: got %+v", got)
	}
	if got := MatchAllocations(allocs, nil); len(got) != 0 {
		t.Errorf("no devices: got %+v", got)
	}
}

func TestKubeletCachesAnswers(t *testing.T) {
	fk, socket, _ := newFakeKubelet(t, loadListFixture(t))
	k := newKubelet(t, socket, time.Second, 5*time.Second)
	clock := newFakeClock()
	k.now = clock.Now

	first, err := k.Allocations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(4 * time.Second)
	second, err := k.Allocations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if calls := fk.calls.Load(); calls != 1 {
		t.Errorf("List calls within the TTL = %d, want 1", calls)
	}
	if !slices.Equal(first, second) {
		t.Errorf("cached answer differs: %+v vs %+v", first, second)
	}

	// After the TTL the kubelet is asked again and a change is seen.
	fk.set(&podresourcesv1.ListPodResourcesResponse{}, 0, nil)
	clock.Advance(2 * time.Second)
	third, err := k.Allocations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if calls := fk.calls.Load(); calls != 2 {
		t.Errorf("List calls after the TTL = %d, want 2", calls)
	}
	if len(third) != 0 {
		t.Errorf("after every pod ended: got %+v", third)
	}
}

// ListCached answers what List does while the cache is fresh, without a
// call to the kubelet; not before the first call, nor after the TTL.
func TestKubeletListCached(t *testing.T) {
	fk, socket, _ := newFakeKubelet(t, loadListFixture(t))
	k := newKubelet(t, socket, time.Second, 5*time.Second)
	clock := newFakeClock()
	k.now = clock.Now
	devices := []snapshot.Device{{Index: 0, UUID: uuidTrainerA}, {Index: 1, UUID: uuidTrainerB}, {Index: 2, UUID: uuidShared}}
	if _, ok := k.ListCached(devices); ok {
		t.Fatal("answered before the kubelet was asked")
	}
	want, err := k.List(context.Background(), devices)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(4 * time.Second)
	got, ok := k.ListCached(devices)
	if !ok || !slices.Equal(got, want) {
		t.Errorf("ListCached = %+v, %v; want %+v", got, ok, want)
	}
	if calls := fk.calls.Load(); calls != 1 {
		t.Errorf("List calls = %d, want 1", calls)
	}
	// Other GPUs: matched again, not the answer kept for the first ones.
	moved := []snapshot.Device{{Index: 0, UUID: uuidShared}}
	if got, ok := k.ListCached(moved); !ok || !slices.Equal(got, MatchAllocations(k.allocs, moved)) {
		t.Errorf("ListCached for other GPUs = %+v, %v; want them matched anew", got, ok)
	}
	if got, _ := k.ListCached(devices); !slices.Equal(got, want) {
		t.Errorf("back on the first GPUs: ListCached = %+v, want %+v", got, want)
	}
	clock.Advance(2 * time.Second)
	if _, ok := k.ListCached(devices); ok {
		t.Error("answered after the TTL")
	}
	// A new answer from the kubelet is matched anew, on the same GPUs.
	fk.set(&podresourcesv1.ListPodResourcesResponse{}, 0, nil)
	if _, err := k.List(context.Background(), devices); err != nil {
		t.Fatal(err)
	}
	if got, ok := k.ListCached(devices); !ok || len(got) != 0 {
		t.Errorf("after every pod ended: ListCached = %+v, %v; want none", got, ok)
	}
}

// TestKubeletFailureBacksOff: a failed call is reported once; until the
// retry time no call is made, the last good answer stands in while it is
// recent, and then nothing does.
func TestKubeletFailureBacksOff(t *testing.T) {
	fk, socket, _ := newFakeKubelet(t, loadListFixture(t))
	k := newKubelet(t, socket, time.Second, 5*time.Second)
	clock := newFakeClock()
	k.now = clock.Now

	goodAt := clock.Now()
	good, err := k.Allocations(context.Background())
	if err != nil || len(good) == 0 {
		t.Fatalf("first call: %v, %d allocations", err, len(good))
	}

	fk.set(nil, 0, status.Error(codes.Internal, "podresources: boom"))
	clock.Advance(6 * time.Second)
	if _, err := k.Allocations(context.Background()); err == nil {
		t.Fatal("failing kubelet: no error")
	}
	if calls := fk.calls.Load(); calls != 2 {
		t.Fatalf("calls = %d, want 2", calls)
	}

	clock.Advance(10 * time.Second)
	stale, err := k.Allocations(context.Background())
	if err != nil {
		t.Errorf("within the retry period: err = %v, want none (the failure was reported)", err)
	}
	if !slices.Equal(stale, good) {
		t.Errorf("within the retry period: got %+v, want the last good answer", stale)
	}
	if calls := fk.calls.Load(); calls != 2 {
		t.Errorf("calls within the retry period = %d, want 2", calls)
	}

	// Retry time: asked again, fails again, reported again.
	clock.Advance(k.retryAfter)
	if _, err := k.Allocations(context.Background()); err == nil {
		t.Error("second failure: no error")
	}
	if calls := fk.calls.Load(); calls != 3 {
		t.Errorf("calls after the retry period = %d, want 3", calls)
	}
	// Later in this retry period, the last good answer becomes too old
	// to stand in.
	clock.Advance(goodAt.Add(k.maxStale).Sub(clock.Now()) + time.Second)
	if !clock.Now().Before(k.retryAt) {
		t.Fatal("test clock left the retry period")
	}
	if got, err := k.Allocations(context.Background()); err != nil || got != nil {
		t.Errorf("after maxStale: got %+v, %v; want nothing and no error", got, err)
	}

	// The kubelet recovers.
	fk.set(loadListFixture(t), 0, nil)
	clock.Advance(k.retryAfter)
	if got, err := k.Allocations(context.Background()); err != nil || !slices.Equal(got, good) {
		t.Errorf("after recovery: got %+v, %v", got, err)
	}
}

func TestKubeletAbsentSocket(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "absent.sock")
	const timeout = 2 * time.Second
	k := newKubelet(t, socket, timeout, time.Second)
	start := time.Now()
	got, err := k.Allocations(context.Background())
	if took := time.Since(start); took > timeout {
		t.Errorf("absent socket took %v, more than the %v timeout", took, timeout)
	}
	if !errors.Is(err, ErrUnavailable) || got != nil {
		t.Errorf("absent socket: got %+v, err %v; want an ErrUnavailable", got, err)
	}
}

// TestKubeletSilentSocket: a socket that accepts and never answers (gRPC's
// handshake hangs) costs one timeout, then nothing until the retry time.
func TestKubeletSilentSocket(t *testing.T) {
	socket, accepted := silentSocket(t)
	const timeout = 300 * time.Millisecond
	k := newKubelet(t, socket, timeout, time.Second)

	start := time.Now()
	_, err := k.Allocations(context.Background())
	if took := time.Since(start); took > timeout+time.Second {
		t.Errorf("silent socket took %v with a %v timeout", took, timeout)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("silent socket: err = %v, want an ErrUnavailable", err)
	}
	if accepted.Load() == 0 {
		t.Error("the client never connected: the test proves nothing")
	}

	start = time.Now()
	if got, err := k.Allocations(context.Background()); err != nil || got != nil {
		t.Errorf("within the retry period: got %+v, %v; want nothing, at once", got, err)
	}
	if took := time.Since(start); took > timeout/2 {
		t.Errorf("a call within the retry period took %v", took)
	}
}

func TestKubeletSlowServer(t *testing.T) {
	fk, socket, _ := newFakeKubelet(t, loadListFixture(t))
	fk.set(loadListFixture(t), 5*time.Second, nil)
	const timeout = 200 * time.Millisecond
	k := newKubelet(t, socket, timeout, time.Second)

	start := time.Now()
	_, err := k.Allocations(context.Background())
	if took := time.Since(start); took > timeout+time.Second {
		t.Errorf("slow server took %v with a %v timeout", took, timeout)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("slow server: err = %v, want an ErrUnavailable", err)
	}
	if fk.calls.Load() != 1 {
		t.Errorf("calls = %d, want 1", fk.calls.Load())
	}
}

// TestKubeletCallOutlivesCaller: a caller whose context ends first gets
// an error at once, but the call goes on and serves the next caller.
func TestKubeletCallOutlivesCaller(t *testing.T) {
	fk, socket, _ := newFakeKubelet(t, loadListFixture(t))
	fk.set(loadListFixture(t), 300*time.Millisecond, nil)
	k := newKubelet(t, socket, 5*time.Second, time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := k.Allocations(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("short caller: err = %v, want its deadline", err)
	}
	got, err := k.Allocations(context.Background())
	if err != nil || len(got) == 0 {
		t.Fatalf("second caller: %d allocations, %v", len(got), err)
	}
	if calls := fk.calls.Load(); calls != 1 {
		t.Errorf("List calls = %d, want 1 (the second caller joins the first call)", calls)
	}
}

func TestNewKubeletResolverRejectsBadAddress(t *testing.T) {
	for _, addr := range []string{"", "unix://", "kubelet.sock", "unix://relative.sock", "tcp://127.0.0.1:10250"} {
		if k, err := NewKubeletResolver(addr, time.Second, time.Second); err == nil {
			k.Close()
			t.Errorf("NewKubeletResolver(%q): no error", addr)
		}
	}
}

func TestKubeletAfterClose(t *testing.T) {
	_, socket, _ := newFakeKubelet(t, loadListFixture(t))
	k, err := NewKubeletResolver(socket, time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	k.Close()
	if _, err := k.Allocations(context.Background()); err == nil {
		t.Error("Allocations after Close: no error")
	}
}

// TestKubeletSocketPathWithURLCharacters: a socket path with a URL's
// fragment, query or escape character in it is still the path dialled.
func TestKubeletSocketPathWithURLCharacters(t *testing.T) {
	fk := &fakeKubelet{resp: loadListFixture(t)}
	socket := filepath.Join(shortTempDir(t), "a#b?c%zz d.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, fk)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	for _, addr := range []string{socket, "unix://" + socket} {
		k := newKubelet(t, addr, 10*time.Second, time.Minute)
		if got, err := k.Allocations(context.Background()); err != nil || len(got) == 0 {
			t.Errorf("%q: %d allocations, %v", addr, len(got), err)
		}
	}
	if calls := fk.calls.Load(); calls != 2 {
		t.Errorf("List calls = %d, want 2", calls)
	}
}

// TestEnrichWithKubelet: the Attributor fills Snapshot.Allocations from
// the kubelet, without any process on the GPUs, and counts failures.
func TestEnrichWithKubelet(t *testing.T) {
	_, socket, _ := newFakeKubelet(t, loadListFixture(t))
	k := newKubelet(t, socket, time.Second, time.Minute)
	a := newFixtureAttributor(t, Options{AllocationSources: []AllocationSource{k}})
	s := &snapshot.Snapshot{Devices: []snapshot.Device{
		{Index: 0, UUID: uuidShared, Up: true},
		{Index: 1, UUID: uuidMIGHost, Up: true, MIGInstances: []snapshot.MIGInstance{{UUID: migServer}, {UUID: migWorker}}},
	}}
	a.Enrich(context.Background(), s)
	pod := func(ns, name, c string) snapshot.Pod { return snapshot.Pod{Namespace: ns, Name: name, Container: c} }
	want := []snapshot.Allocation{
		{GPU: 0, GPUUUID: uuidShared, Pod: pod("ml", "shared-renamed", "main")},
		{GPU: 0, GPUUUID: uuidShared, Pod: pod(oddNamespace, oddPodName, "jupyter")},
		{GPU: 1, GPUUUID: uuidMIGHost, MIGUUID: migServer, Pod: pod("serving", "inference-7f9c", "server")},
		{GPU: 1, GPUUUID: uuidMIGHost, MIGUUID: migWorker, Pod: pod("serving", "inference-7f9c", "worker")},
	}
	if !slices.Equal(s.Allocations, want) {
		t.Errorf("allocations:\n got %+v\nwant %+v", s.Allocations, want)
	}
	if n, ok := s.AttributionErrors[SourceKubelet]; !ok || n != 0 {
		t.Errorf("kubelet errors = %d (present %v), want 0", n, ok)
	}
}

func TestEnrichWithAbsentKubelet(t *testing.T) {
	k := newKubelet(t, filepath.Join(shortTempDir(t), "absent.sock"), time.Second, time.Minute)
	a := newFixtureAttributor(t, Options{AllocationSources: []AllocationSource{k}})
	devices := []snapshot.Device{{Index: 0, UUID: uuidShared, Up: true}}
	for range 3 {
		s := &snapshot.Snapshot{Devices: devices}
		a.Enrich(context.Background(), s)
		if len(s.Allocations) != 0 {
			t.Errorf("allocations from an absent kubelet: %+v", s.Allocations)
		}
		// One failed call, counted once: the later scrapes fall in the
		// retry period and ask nothing.
		if got := s.AttributionErrors[SourceKubelet]; got != 1 {
			t.Errorf("kubelet errors = %d, want 1", got)
		}
	}
}

// TestKubeletRestart: the connection is kept between calls; when the
// kubelet restarts (socket gone, then served again by a new process) the
// resolver finds it again without being recreated.
func TestKubeletRestart(t *testing.T) {
	fk, socket, srv := newFakeKubelet(t, loadListFixture(t))
	k := newKubelet(t, socket, time.Second, 5*time.Second)
	clock := newFakeClock()
	k.now = clock.Now
	if _, err := k.Allocations(context.Background()); err != nil {
		t.Fatal(err)
	}

	srv.Stop() // also removes the socket file
	clock.Advance(6 * time.Second)
	if _, err := k.Allocations(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("kubelet gone: err = %v, want an ErrUnavailable", err)
	}

	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv2, fk)
	go srv2.Serve(l)
	t.Cleanup(srv2.Stop)

	// gRPC may still be waiting out its reconnect backoff (at most 5s)
	// when the retry period ends; the kubelet is back within a few tries.
	testenv.Eventually(t, 10*time.Second, func() error {
		clock.Advance(k.retryAfter)
		got, err := k.Allocations(context.Background())
		if err == nil && len(got) == 0 {
			err = errors.New("no allocations")
		}
		return err
	})
}

// BenchmarkKubeletWarm is the per-scrape cost of the kubelet source with
// its cache warm: 8 GPUs, 50 pods (the bench profile's scale).
func BenchmarkKubeletWarm(b *testing.B) {
	resp := &podresourcesv1.ListPodResourcesResponse{}
	var devices []snapshot.Device
	for i := range 8 {
		devices = append(devices, snapshot.Device{Index: i, UUID: fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i), Up: true})
	}
	for p := range 50 {
		resp.PodResources = append(resp.PodResources, &podresourcesv1.PodResources{
			Name: fmt.Sprintf("pod-%d", p), Namespace: "ml",
			Containers: []*podresourcesv1.ContainerResources{{Name: "main", Devices: []*podresourcesv1.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{fmt.Sprintf("%s::%d", devices[p%8].UUID, p)}},
			}}},
		})
	}
	_, socket, _ := newFakeKubelet(b, resp)
	k := newKubelet(b, socket, time.Second, time.Hour)
	if _, err := k.List(context.Background(), devices); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		allocs, err := k.List(context.Background(), devices)
		if err != nil || len(allocs) != 50 {
			b.Fatalf("%d allocations, %v", len(allocs), err)
		}
	}
}

func TestDetectSocket(t *testing.T) {
	dir := shortTempDir(t)
	socket := filepath.Join(dir, "live.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	file := filepath.Join(dir, "not-a-socket")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(dir, "absent.sock")

	if got := DetectSocket(absent, file, dir, socket); got != socket {
		t.Errorf("DetectSocket = %q, want %q", got, socket)
	}
	if got := DetectSocket(absent, "unix://"+socket); got != "unix://"+socket {
		t.Errorf("DetectSocket with unix:// = %q", got)
	}
	if got := DetectSocket(absent, file); got != "" {
		t.Errorf("DetectSocket with no socket = %q, want empty", got)
	}
	if got := DetectSocket(); got != "" {
		t.Errorf("DetectSocket() = %q", got)
	}
}

// What an accounting tick pays for the kubelet's allocations once its
// answer is cached: matching it to the GPUs ("match", what every tick did)
// against the match kept while the answer and the GPUs stand ("cached").
func BenchmarkKubeletListCached(b *testing.B) {
	_, socket, _ := newFakeKubelet(b, loadListFixture(b))
	k := newKubelet(b, socket, time.Second, time.Hour)
	devices := []snapshot.Device{{Index: 0, UUID: uuidTrainerA}, {Index: 1, UUID: uuidTrainerB}, {Index: 2, UUID: uuidShared}}
	for i := 3; i < 8; i++ {
		devices = append(devices, snapshot.Device{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Info: snapshot.Info{MinorNumber: snapshot.Some(i)}})
	}
	if _, err := k.List(context.Background(), devices); err != nil {
		b.Fatal(err)
	}
	b.Run("match", func(b *testing.B) {
		for b.Loop() {
			MatchAllocations(k.allocs, devices)
		}
	})
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			k.ListCached(devices)
		}
	})
}

// agedViewRig is a fake kubelet (5 s cache, on a fake clock) as an
// Attributor's allocation source, and the Attributor's view that takes
// its answer up to 30 s old (the accounting's ticks').
func agedViewRig(t *testing.T) (*fakeKubelet, *fakeClock, *Attributor, *AgedAttributor) {
	fk, socket, _ := newFakeKubelet(t, loadListFixture(t))
	k := newKubelet(t, socket, time.Second, 5*time.Second)
	clock := newFakeClock()
	k.now = clock.Now
	a := newFixtureAttributor(t, Options{AllocationSources: []AllocationSource{k}})
	return fk, clock, a, a.WithAllocationMaxAge(30 * time.Second)
}

// An Attributor's WithAllocationMaxAge view takes the kubelet's cached
// answer past its 5 s freshness, up to the view's age; Enrich itself calls
// the kubelet once the answer is 5 s old. Both share the one cache.
func TestAllocationMaxAgeViewKeepsTheKubeletsAnswer(t *testing.T) {
	fk, clock, a, ticks := agedViewRig(t)
	devices := []snapshot.Device{{Index: 0, UUID: uuidTrainerA}, {Index: 1, UUID: uuidTrainerB}, {Index: 2, UUID: uuidShared}}
	enrich := func(e interface {
		Enrich(context.Context, *snapshot.Snapshot)
	}) []snapshot.Allocation {
		s := &snapshot.Snapshot{Devices: devices}
		e.Enrich(context.Background(), s)
		return s.Allocations
	}
	want := enrich(ticks) // nothing cached yet: the kubelet is called
	if len(want) == 0 || fk.calls.Load() != 1 {
		t.Fatalf("first Enrich: %d allocations, %d calls; want some, 1", len(want), fk.calls.Load())
	}
	clock.Advance(20 * time.Second)
	if got := enrich(ticks); !slices.Equal(got, want) || fk.calls.Load() != 1 {
		t.Errorf("20 s later, through the view: %+v after %d calls; want the cached answer, no call", got, fk.calls.Load())
	}
	if got := enrich(a); !slices.Equal(got, want) || fk.calls.Load() != 2 {
		t.Errorf("20 s later, Enrich: %d calls, want the kubelet called again (2)", fk.calls.Load())
	}
	clock.Advance(31 * time.Second)
	if enrich(ticks); fk.calls.Load() != 3 {
		t.Errorf("31 s after the last call, through the view: %d calls, want 3", fk.calls.Load())
	}
}

// ListCachedWithin answers past the TTL up to maxAge, and never past both.
func TestKubeletListCachedWithin(t *testing.T) {
	_, socket, _ := newFakeKubelet(t, loadListFixture(t))
	k := newKubelet(t, socket, time.Second, 5*time.Second)
	clock := newFakeClock()
	k.now = clock.Now
	devices := []snapshot.Device{{Index: 0, UUID: uuidTrainerA}}
	if _, ok := k.ListCachedWithin(devices, time.Hour); ok {
		t.Fatal("answered before the kubelet was asked")
	}
	want, err := k.List(context.Background(), devices)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if _, ok := k.ListCached(devices); ok {
		t.Error("ListCached answered 10 s after the call, past its 5 s TTL")
	}
	if got, ok := k.ListCachedWithin(devices, 30*time.Second); !ok || !slices.Equal(got, want) {
		t.Errorf("ListCachedWithin(30 s) at 10 s = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := k.ListCachedWithin(devices, 2*time.Second); ok {
		t.Error("ListCachedWithin(2 s) answered at 10 s")
	}
	clock.Advance(25 * time.Second)
	if _, ok := k.ListCachedWithin(devices, 30*time.Second); ok {
		t.Error("ListCachedWithin(30 s) answered at 35 s")
	}
}

// A tick between two lists (no GPU's processes listed) takes the
// allocations from the sources' caches through the view and runs nothing
// else of Enrich; once a source has no cached answer, or a GPU is listed,
// the whole Enrich runs.
func TestAllocationMaxAgeViewBetweenListsTakesTheCachedAllocationsAlone(t *testing.T) {
	fk, clock, a, ticks := agedViewRig(t)
	devices := func(listed bool) []snapshot.Device {
		ds := []snapshot.Device{{Index: 0, UUID: uuidTrainerA}, {Index: 1, UUID: uuidTrainerB}, {Index: 2, UUID: uuidShared}}
		for i := range ds {
			ds[i].Up, ds[i].ProcessesNotListed = true, !listed
		}
		return ds
	}
	tick := func(listed bool) (*snapshot.Snapshot, bool) {
		gen := a.gen
		s := &snapshot.Snapshot{Devices: devices(listed)}
		ticks.Enrich(context.Background(), s)
		return s, a.gen != gen
	}
	first, whole := tick(false) // nothing cached: the kubelet is called
	if len(first.Allocations) == 0 || fk.calls.Load() != 1 || !whole {
		t.Fatalf("first tick: %d allocations, %d calls, whole Enrich %v; want some, 1, true", len(first.Allocations), fk.calls.Load(), whole)
	}
	clock.Advance(20 * time.Second)
	s, whole := tick(false)
	if !slices.Equal(s.Allocations, first.Allocations) || fk.calls.Load() != 1 || whole {
		t.Errorf("20 s later between lists: %+v after %d calls, whole Enrich %v; want the cached answer, no call, allocations alone", s.Allocations, fk.calls.Load(), whole)
	}
	if n, ok := s.AttributionErrors[SourceKubelet]; !ok || n != 0 {
		t.Errorf("between lists: kubelet errors %d (present %v), want 0", n, ok)
	}
	if _, whole := tick(true); !whole {
		t.Error("a tick that lists a GPU took the allocations alone")
	}
	clock.Advance(31 * time.Second)
	s, whole = tick(false)
	if fk.calls.Load() != 2 || !whole || len(s.Allocations) == 0 {
		t.Errorf("31 s after the call, between lists: %d calls, whole Enrich %v, %d allocations; want 2, true, some", fk.calls.Load(), whole, len(s.Allocations))
	}
}
