package attribution

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// fakeResolver is a container resolver whose answers a test can change.
type fakeResolver struct {
	source string
	mu     sync.Mutex
	metas  map[string]ContainerMeta
	calls  int
	gate   chan struct{} // when set, lookups wait for it to close
}

func newFakeResolver(source string, metas map[string]ContainerMeta) *fakeResolver {
	return &fakeResolver{source: source, metas: metas}
}

func (f *fakeResolver) Source() string { return f.source }
func (f *fakeResolver) Handles(runtime string) bool {
	return runtime == RuntimeDocker || runtime == RuntimePodman
}

func (f *fakeResolver) Resolve(_ context.Context, id string) (ContainerMeta, error) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	m, ok := f.metas[id]
	if !ok {
		return ContainerMeta{}, errors.New("no such container")
	}
	return m, nil
}

func (f *fakeResolver) set(id string, m ContainerMeta) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.metas[id] = m
}

// hold makes later lookups wait until the returned function is called.
func (f *fakeResolver) hold() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gate := make(chan struct{})
	f.gate = gate
	return func() { close(gate) }
}

func (f *fakeResolver) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// wantContainers checks each process's container id and name.
func wantContainers(t *testing.T, s *snapshot.Snapshot, want ...[2]string) {
	t.Helper()
	if len(s.Processes) != len(want) {
		t.Fatalf("%d processes, want %d", len(s.Processes), len(want))
	}
	for i, w := range want {
		if c := s.Processes[i].Owner.Container; c.ID != w[0] || c.Name != w[1] {
			t.Errorf("process %d (pid %d): container %q named %q, want %q named %q", i, s.Processes[i].PID, c.ID, c.Name, w[0], w[1])
		}
	}
}

func TestChangedContainerAnswerReachesCachedProcesses(t *testing.T) {
	r := newFakeResolver("fake", map[string]ContainerMeta{fixtureDockerID: {Name: "before"}})
	a := newFixtureAttributor(t, Options{Resolvers: []ContainerResolver{r}, CacheTTL: time.Minute, RevalidateInterval: time.Hour})
	clock := newFakeClock()
	a.now = clock.Now
	s := procs(1001, 1001)
	a.Enrich(context.Background(), s)
	wantContainers(t, s, [2]string{fixtureDockerID, "before"}, [2]string{fixtureDockerID, "before"})

	r.set(fixtureDockerID, ContainerMeta{Name: "after", Image: "img"})
	release := r.hold()
	clock.Advance(2 * time.Minute)
	s = procs(1001, 1001)
	// The answer has expired and its refresh cannot finish yet: Enrich
	// serves the expired answer rather than waiting for the lookup.
	a.Enrich(context.Background(), s)
	wantContainers(t, s, [2]string{fixtureDockerID, "before"}, [2]string{fixtureDockerID, "before"})
	release()
	testenv.Eventually(t, 5*time.Second, func() error {
		s = procs(1001, 1001)
		a.Enrich(context.Background(), s)
		if s.Processes[0].Owner.Container.Name == "before" {
			return errors.New("the refreshed answer is not served yet")
		}
		return nil
	})
	wantContainers(t, s, [2]string{fixtureDockerID, "after"}, [2]string{fixtureDockerID, "after"})
	if img := s.Processes[1].Owner.Container.Image; img != "img" {
		t.Errorf("image = %q after the refresh, want img", img)
	}
	if calls := r.callCount(); calls != 2 {
		t.Errorf("%d lookups, want 2 (first and after expiry)", calls)
	}
}

func TestEarlierResolverWinsPerField(t *testing.T) {
	first := newFakeResolver("first", map[string]ContainerMeta{fixtureDockerID: {Name: "from-first"}})
	second := newFakeResolver("second", map[string]ContainerMeta{fixtureDockerID: {Name: "from-second", Image: "img-second"}})
	a := newFixtureAttributor(t, Options{Resolvers: []ContainerResolver{first, second}})
	s := procs(1001)
	a.Enrich(context.Background(), s)
	if c := s.Processes[0].Owner.Container; c.Name != "from-first" || c.Image != "img-second" {
		t.Errorf("got name %q image %q, want from-first and img-second", c.Name, c.Image)
	}
}

func TestGroupsAreForgottenWithTheirProcesses(t *testing.T) {
	root := tempProc(t, 1001, 1002, 1018)
	// A second process in 1001's container.
	copyDir(t, filepath.Join(root, "1001"), filepath.Join(root, "2001"))
	r := newFakeResolver("fake", map[string]ContainerMeta{fixtureDockerID: {Name: "shared"}})
	a := newFixtureAttributor(t, Options{ProcRoot: root, Resolvers: []ContainerResolver{r}})

	s := procs(1001, 2001, 1002, 1018)
	a.Enrich(context.Background(), s)
	if s.Processes[1].Owner.Container.Name != "shared" {
		t.Fatalf("pid 2001 not attributed: %+v", s.Processes[1].Owner.Container)
	}
	if n := len(a.containers); n != 3 {
		t.Errorf("%d container groups for 3 containers", n)
	}
	if g := a.containers[containerKey{RuntimeDocker, fixtureDockerID}]; g == nil || g.refs != 2 {
		t.Errorf("group of the shared container: %+v, want 2 references", g)
	}
	if calls := r.callCount(); calls != 3 {
		t.Errorf("%d lookups for 3 containers", calls)
	}

	a.Enrich(context.Background(), procs(2001, 1018))
	if g := a.containers[containerKey{RuntimeDocker, fixtureDockerID}]; len(a.containers) != 2 || g == nil || g.refs != 1 {
		t.Errorf("after 1001 and 1002 went: %d groups, shared one %+v", len(a.containers), g)
	}
	a.Enrich(context.Background(), procs())
	if len(a.containers) != 0 || len(a.pids) != 0 || a.current != 0 {
		t.Errorf("with no processes left: %d groups, %d pids, current %d", len(a.containers), len(a.pids), a.current)
	}
}

func TestPIDReusedInAnotherContainer(t *testing.T) {
	root := tempProc(t, 1001)
	r := newFakeResolver("fake", map[string]ContainerMeta{fixtureDockerID: {Name: "old"}, fixturePodmanID: {Name: "new"}})
	a := newFixtureAttributor(t, Options{ProcRoot: root, Resolvers: []ContainerResolver{r}, RevalidateInterval: 10 * time.Second})
	clock := newFakeClock()
	a.now = clock.Now
	s := procs(1001)
	a.Enrich(context.Background(), s)
	wantContainers(t, s, [2]string{fixtureDockerID, "old"})

	// PID 1001 is reused, later, by a process in pid 1018's container.
	stat, err := os.ReadFile(filepath.Join(root, "1001", "stat"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stat), " 101001 ") {
		t.Fatal("fixture stat has no start time 101001")
	}
	if err := os.WriteFile(filepath.Join(root, "1001", "stat"), []byte(strings.ReplaceAll(string(stat), " 101001 ", " 555555 ")), 0o644); err != nil {
		t.Fatal(err)
	}
	cgroup, err := os.ReadFile("testdata/proc/1018/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "1001", "cgroup"), cgroup, 0o644); err != nil {
		t.Fatal(err)
	}

	clock.Advance(11 * time.Second)
	a.Enrich(context.Background(), procs(1001)) // starts the check
	finishRevalidation(t, a)
	s = procs(1001)
	a.Enrich(context.Background(), s) // merges it
	wantContainers(t, s, [2]string{fixturePodmanID, "new"})
	if _, old := a.containers[containerKey{RuntimeDocker, fixtureDockerID}]; old || len(a.containers) != 1 {
		t.Errorf("container groups after the reuse: %d, old one kept: %v", len(a.containers), old)
	}
}

func TestListingOrderChanges(t *testing.T) {
	r := newFakeResolver("fake", map[string]ContainerMeta{fixtureDockerID: {Name: "docker"}, fixturePodmanID: {Name: "podman"}})
	a := newFixtureAttributor(t, Options{Resolvers: []ContainerResolver{r}})
	docker, podman, host := [2]string{fixtureDockerID, "docker"}, [2]string{fixturePodmanID, "podman"}, [2]string{"", ""}
	for _, step := range []struct {
		pids []uint32
		want [][2]string
	}{
		{[]uint32{1001, 1018, 1029}, [][2]string{docker, podman, host}},
		{[]uint32{1001, 1018, 1029}, [][2]string{docker, podman, host}},
		{[]uint32{1029, 1001, 1001, 1018}, [][2]string{host, docker, docker, podman}},
		{[]uint32{1018}, [][2]string{podman}},
		{[]uint32{1018, 1001, 1029, 1002}, [][2]string{podman, docker, host, {"51ddf3f59d3b176be0b4e4f6e6d227f1313a838f091c8c9adb5621b8536ef434", ""}}},
		{[]uint32{1001, 1018}, [][2]string{docker, podman}},
	} {
		s := procs(step.pids...)
		a.Enrich(context.Background(), s)
		wantContainers(t, s, step.want...)
		if a.current != len(a.pids) {
			t.Errorf("pids %v: %d cache entries, %d seen", step.pids, len(a.pids), a.current)
		}
	}
}

func TestUncachedProcessWithCallerOwnerIsResolved(t *testing.T) {
	root := tempProc(t, 1001, 1002)
	stuckProc(t, root, 1002) // holds the read of both new processes
	r := newFakeResolver("fake", map[string]ContainerMeta{fixtureDockerID: {Name: "named"}})
	a := newFixtureAttributor(t, Options{ProcRoot: root, Resolvers: []ContainerResolver{r}})
	withOwner := func() *snapshot.Snapshot {
		s := procs(1001, 1002)
		s.Processes[1].Owner.Container = snapshot.Container{Runtime: RuntimeDocker, ID: fixtureDockerID}
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	a.Enrich(ctx, withOwner())

	// The read is still stuck: neither process is cached, and the owner
	// the caller gave is resolved as it is.
	s := withOwner()
	a.Enrich(context.Background(), s)
	if len(a.pids) != 0 {
		t.Fatalf("%d pids cached while their read is stuck", len(a.pids))
	}
	wantContainers(t, s, [2]string{"", ""}, [2]string{fixtureDockerID, "named"})
}
