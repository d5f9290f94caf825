package attribution

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimev1 "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// Containers of the fixture procfs tree.
const (
	fixtureContainerdID = "cf1ae8d7980913d50f110a21d52008427c84be577607e7d2bf2157feb39aa905" // pid 1011, pod b5e73804-…
	fixtureContainerdNo = "85d21612fc0c40108214a22a43aac811cdad5391ffca9e51db752cf8fc467013" // pid 1012, unknown to the runtime
)

// fakeCRI serves ContainerStatus like containerd's CRI plugin and CRI-O.
type fakeCRI struct {
	runtimev1.UnimplementedRuntimeServiceServer
	containers map[string]*runtimev1.ContainerStatus
	delay      time.Duration
	calls      atomic.Int64
}

func (f *fakeCRI) ContainerStatus(ctx context.Context, req *runtimev1.ContainerStatusRequest) (*runtimev1.ContainerStatusResponse, error) {
	f.calls.Add(1)
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	st, ok := f.containers[req.GetContainerId()]
	if !ok {
		// containerd's wording and code.
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find container %q: not found", req.GetContainerId())
	}
	return &runtimev1.ContainerStatusResponse{Status: st}, nil
}

func newFakeCRI(t testing.TB, containers map[string]*runtimev1.ContainerStatus) (*fakeCRI, string) {
	t.Helper()
	fc := &fakeCRI{containers: containers}
	socket, _ := serveGRPC(t, func(s *grpc.Server) { runtimev1.RegisterRuntimeServiceServer(s, fc) })
	return fc, socket
}

// criStatus is a container status as the kubelet's labels make it.
func criStatus(id, container, pod, namespace, podUID, image string) *runtimev1.ContainerStatus {
	return &runtimev1.ContainerStatus{
		Id:       id,
		Metadata: &runtimev1.ContainerMetadata{Name: container, Attempt: 0},
		State:    runtimev1.ContainerState_CONTAINER_RUNNING,
		Image:    &runtimev1.ImageSpec{Image: image},
		ImageRef: "sha256:" + strings.Repeat("ab", 32),
		Labels: map[string]string{
			labelContainerName: container,
			labelPodName:       pod,
			labelPodNamespace:  namespace,
			labelPodUID:        podUID,
		},
		Annotations: map[string]string{"io.kubernetes.container.restartCount": "0"},
	}
}

func newCRI(t testing.TB, socket string, timeout time.Duration) *CRIResolver {
	t.Helper()
	c, err := NewCRIResolver(socket, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCRIResolve(t *testing.T) {
	// Label values pass through unchanged, quotes, newlines and all:
	// escaping them is each output's job.
	oddPod, oddNS, oddContainer := "pod \"q\"\nline2", "ns-ü", "c-🚀"
	_, socket := newFakeCRI(t, map[string]*runtimev1.ContainerStatus{
		fixtureContainerdID: criStatus(fixtureContainerdID, "trainer", "train-0", "ml", "b5e73804-f28b-d9ef-6bba-fe1f5f23be90", "nvcr.io/nvidia/pytorch:24.01-py3"),
		fixtureCRIOID:       criStatus(fixtureCRIOID, oddContainer, oddPod, oddNS, "f76bd088-addc-b639-d3af-9bb2e8043685", "quay.io/x/y@sha256:00"),
	})
	c := newCRI(t, "unix://"+socket, time.Second)

	got, err := c.Resolve(context.Background(), fixtureContainerdID)
	if err != nil {
		t.Fatal(err)
	}
	want := ContainerMeta{Name: "trainer", Image: "nvcr.io/nvidia/pytorch:24.01-py3", PodName: "train-0", PodNamespace: "ml", PodContainer: "trainer"}
	if got != want {
		t.Errorf("containerd container:\n got %+v\nwant %+v", got, want)
	}

	got, err = c.Resolve(context.Background(), fixtureCRIOID)
	if err != nil {
		t.Fatal(err)
	}
	want = ContainerMeta{Name: oddContainer, Image: "quay.io/x/y@sha256:00", PodName: oddPod, PodNamespace: oddNS, PodContainer: oddContainer}
	if got != want {
		t.Errorf("odd labels:\n got %+v\nwant %+v", got, want)
	}

	pod, err := c.Pod(context.Background(), fixtureCRIOID)
	if err != nil {
		t.Fatal(err)
	}
	if wantPod := (snapshot.Pod{UID: "f76bd088-addc-b639-d3af-9bb2e8043685", Name: oddPod, Namespace: oddNS, Container: oddContainer}); pod != wantPod {
		t.Errorf("Pod:\n got %+v\nwant %+v", pod, wantPod)
	}

	_, err = c.Resolve(context.Background(), fixtureContainerdNo)
	if err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("unknown container: err = %v, want a not-found error that is not ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), fixtureContainerdNo) {
		t.Errorf("error %q does not name the container", err)
	}
}

func TestCRIPrefersUserSpecifiedImage(t *testing.T) {
	// The kubelet creates containers from the image id; newer runtimes
	// report what the pod spec said as UserSpecifiedImage.
	st := criStatus(fixtureContainerdID, "c", "p", "ns", "uid", "sha256:"+strings.Repeat("cd", 32))
	st.Image.UserSpecifiedImage = "nvcr.io/nvidia/cuda:12.4.1-base"
	_, socket := newFakeCRI(t, map[string]*runtimev1.ContainerStatus{fixtureContainerdID: st})
	got, err := newCRI(t, socket, time.Second).Resolve(context.Background(), fixtureContainerdID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Image != "nvcr.io/nvidia/cuda:12.4.1-base" {
		t.Errorf("image = %q", got.Image)
	}
}

func TestCRINonKubernetesContainer(t *testing.T) {
	st := &runtimev1.ContainerStatus{Id: fixtureContainerdID, Metadata: &runtimev1.ContainerMetadata{Name: "plain"}, Image: &runtimev1.ImageSpec{Image: "busybox"}}
	_, socket := newFakeCRI(t, map[string]*runtimev1.ContainerStatus{fixtureContainerdID: st})
	got, err := newCRI(t, socket, time.Second).Resolve(context.Background(), fixtureContainerdID)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ContainerMeta{Name: "plain", Image: "busybox"}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestCRIHandles(t *testing.T) {
	c := newCRI(t, "/nonexistent/cri.sock", time.Second)
	for runtime, want := range map[string]bool{RuntimeContainerd: true, RuntimeCRIO: true, RuntimeDocker: false, RuntimePodman: false, "": false} {
		if got := c.Handles(runtime); got != want {
			t.Errorf("Handles(%q) = %v, want %v", runtime, got, want)
		}
	}
	if c.Source() != SourceCRI {
		t.Errorf("Source() = %q", c.Source())
	}
}

func TestCRIAbsentSocket(t *testing.T) {
	const timeout = 2 * time.Second
	c := newCRI(t, filepath.Join(shortTempDir(t), "absent.sock"), timeout)
	start := time.Now()
	_, err := c.Resolve(context.Background(), fixtureContainerdID)
	if took := time.Since(start); took > timeout {
		t.Errorf("absent socket took %v, more than the %v timeout", took, timeout)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("absent socket: err = %v, want an ErrUnavailable", err)
	}
}

func TestCRISilentSocket(t *testing.T) {
	socket, accepted := silentSocket(t)
	const timeout = 300 * time.Millisecond
	c := newCRI(t, socket, timeout)
	start := time.Now()
	// The caller's context allows more; the resolver's own timeout bounds the call.
	_, err := c.Pod(context.Background(), fixtureContainerdID)
	if took := time.Since(start); took > timeout+time.Second {
		t.Errorf("silent socket took %v with a %v timeout", took, timeout)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("silent socket: err = %v, want an ErrUnavailable", err)
	}
	if accepted.Load() == 0 {
		t.Error("the client never connected: the test proves nothing")
	}
}

func TestCRISlowServer(t *testing.T) {
	fc, socket := newFakeCRI(t, map[string]*runtimev1.ContainerStatus{
		fixtureContainerdID: criStatus(fixtureContainerdID, "c", "p", "ns", "uid", "img"),
	})
	fc.delay = 5 * time.Second
	const timeout = 200 * time.Millisecond
	c := newCRI(t, socket, timeout)
	start := time.Now()
	_, err := c.Resolve(context.Background(), fixtureContainerdID)
	if took := time.Since(start); took > timeout+time.Second {
		t.Errorf("slow server took %v with a %v timeout", took, timeout)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("slow server: err = %v, want an ErrUnavailable", err)
	}
}

func TestNewCRIResolverRejectsBadAddress(t *testing.T) {
	for _, addr := range []string{"", "unix://", "containerd.sock", "tcp://127.0.0.1:1234"} {
		if c, err := NewCRIResolver(addr, time.Second); err == nil {
			c.Close()
			t.Errorf("NewCRIResolver(%q): no error", addr)
		}
	}
}

// TestEnrichWithCRI: through the Attributor, containerd and CRI-O
// containers get their pod name, namespace and container name; Docker's are
// not asked of the CRI; answers are cached per container id.
func TestEnrichWithCRI(t *testing.T) {
	fc, socket := newFakeCRI(t, map[string]*runtimev1.ContainerStatus{
		fixtureContainerdID: criStatus(fixtureContainerdID, "trainer", "train-0", "ml", "b5e73804-f28b-d9ef-6bba-fe1f5f23be90", "nvcr.io/nvidia/pytorch:24.01-py3"),
		fixtureCRIOID:       criStatus(fixtureCRIOID, "server", "infer-1", "serving", "f76bd088-addc-b639-d3af-9bb2e8043685", "vllm/vllm-openai:v0.6"),
	})
	c := newCRI(t, socket, time.Second)
	a := newFixtureAttributor(t, Options{Resolvers: []ContainerResolver{c}})
	s := procs(1011, 1014, 1001, 1012)
	s.Processes = append(s.Processes, snapshot.Process{GPU: 1, PID: 1011})
	a.Enrich(context.Background(), s)

	wantPods := []snapshot.Pod{
		{UID: "b5e73804-f28b-d9ef-6bba-fe1f5f23be90", QoSClass: QoSBurstable, Name: "train-0", Namespace: "ml", Container: "trainer"},
		{UID: "f76bd088-addc-b639-d3af-9bb2e8043685", QoSClass: QoSBurstable, Name: "infer-1", Namespace: "serving", Container: "server"},
		{},
		// Unknown to the runtime: what the cgroup says remains.
		{UID: "f684e1ed-4c31-7a42-cc22-e201ab05e206", QoSClass: QoSGuaranteed},
		{UID: "b5e73804-f28b-d9ef-6bba-fe1f5f23be90", QoSClass: QoSBurstable, Name: "train-0", Namespace: "ml", Container: "trainer"},
	}
	for i, want := range wantPods {
		if got := s.Processes[i].Owner.Pod; got != want {
			t.Errorf("pid %d: pod\n got %+v\nwant %+v", s.Processes[i].PID, got, want)
		}
	}
	if got := s.Processes[0].Owner.Container; got.Name != "trainer" || got.Image != "nvcr.io/nvidia/pytorch:24.01-py3" || got.Runtime != RuntimeContainerd {
		t.Errorf("containerd container: %+v", got)
	}
	if calls := fc.calls.Load(); calls != 3 {
		t.Errorf("CRI calls = %d, want 3 (one per containerd or CRI-O container)", calls)
	}
	if got := s.AttributionErrors[SourceCRI]; got != 1 {
		t.Errorf("cri errors = %d, want 1 (the unknown container)", got)
	}

	// Warm: answers, and the unknown container's failure, are cached.
	s2 := procs(1011, 1014, 1012)
	a.Enrich(context.Background(), s2)
	if calls := fc.calls.Load(); calls != 3 {
		t.Errorf("CRI calls after a warm Enrich = %d, want 3", calls)
	}
	if got := s2.Processes[1].Owner.Pod.Name; got != "infer-1" {
		t.Errorf("warm: pod name %q", got)
	}
}

// TestEnrichWithSilentCRI: a runtime socket that never answers must not
// hold Enrich past its budget.
func TestEnrichWithSilentCRI(t *testing.T) {
	socket, _ := silentSocket(t)
	// The socket's timeout is far from the budget, and the bound below
	// sits between the two with a margin a loaded machine cannot eat.
	const timeout = 2 * time.Second
	c := newCRI(t, socket, timeout)
	a := newFixtureAttributor(t, Options{Resolvers: []ContainerResolver{c}, Timeout: timeout})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	s := procs(1011, 1014)
	start := time.Now()
	a.Enrich(ctx, s)
	if took := time.Since(start); took > 100*time.Millisecond+time.Second {
		t.Errorf("Enrich took %v with a 100ms budget", took)
	}
	if got := s.Processes[0].Owner.Container.ID; got != fixtureContainerdID {
		t.Errorf("cgroup attribution lost: %q", got)
	}
	testenv.Eventually(t, timeout+10*time.Second, func() error {
		if a.errs.snapshot()[SourceCRI] == 0 {
			return errors.New("a silent CRI socket counted no error")
		}
		return nil
	})
}
