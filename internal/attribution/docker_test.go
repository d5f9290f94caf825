package attribution

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// fakeDocker serves GET /containers/{id}/json on a unix socket, like the
// Docker Engine API and Podman's compatibility service.
type fakeDocker struct {
	socket     string
	containers map[string]dockerInspect
	calls      atomic.Int64
}

func newFakeDocker(t testing.TB, containers map[string]dockerInspect) *fakeDocker {
	t.Helper()
	fd := &fakeDocker{socket: filepath.Join(shortTempDir(t), "docker.sock"), containers: containers}
	l, err := net.Listen("unix", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fd.calls.Add(1)
		id, ok := strings.CutPrefix(r.URL.Path, "/containers/")
		id, ok2 := strings.CutSuffix(id, "/json")
		c, found := fd.containers[id]
		if !ok || !ok2 || r.Method != http.MethodGet || !found {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"message":"No such container: ` + id + `"}`))
			return
		}
		json.NewEncoder(w).Encode(c)
	}))
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return fd
}

// shortTempDir is a temporary directory with a path short enough for a
// unix socket (108 bytes), which t.TempDir() under a long test name is not.
func shortTempDir(t testing.TB) string { return testenv.ShortTempDir(t) }

func inspect(name, image string, labels map[string]string) dockerInspect {
	var in dockerInspect
	in.Name = "/" + name
	in.Config.Image = image
	in.Config.Labels = labels
	return in
}

const (
	fixtureDockerID = "f4f0b3caffa8f2c594d1bdd814d4a065d9e517ef0b54ae9b2ff0e46432e0ece0" // pid 1001
	fixturePodmanID = "7c26ef4e566c04a44b26ab7380120e9667323b6b105d9cfd50e6cd641b814587" // pid 1018
	fixtureCRIOID   = "98fc6075acf2dac9bcd0b9d829432a49bae9676d09b450aca3db6ae194aef08c" // pid 1014
)

func TestDockerResolverFields(t *testing.T) {
	// Names and labels pass through unchanged, quotes, newlines and all:
	// escaping them is each output's job.
	odd := "we\"ird\nname-ü-🚀"
	fd := newFakeDocker(t, map[string]dockerInspect{
		fixtureDockerID: inspect(odd, "registry.example/train:v1", map[string]string{
			"com.docker.compose.project": "proj \"x\"\n", "com.docker.compose.service": "trainer ✓",
			"io.kubernetes.pod.name": "p", "io.kubernetes.pod.namespace": "ns", "io.kubernetes.container.name": "c",
		}),
	})
	r, err := NewDockerResolver("unix://"+fd.socket, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Resolve(context.Background(), fixtureDockerID)
	if err != nil {
		t.Fatal(err)
	}
	want := ContainerMeta{Name: odd, Image: "registry.example/train:v1", ComposeProject: "proj \"x\"\n", ComposeService: "trainer ✓",
		PodName: "p", PodNamespace: "ns", PodContainer: "c"}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}

	_, err = r.Resolve(context.Background(), strings.Repeat("0", 64))
	if err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("unknown container: err = %v, want a not-found error that is not ErrUnavailable", err)
	}
}

func TestNewDockerResolverRejectsBadAddress(t *testing.T) {
	for _, addr := range []string{"unix://", "http://x", "tcp://nohostport", "docker.sock"} {
		if _, err := NewDockerResolver(addr, time.Second); err == nil {
			t.Errorf("NewDockerResolver(%q): no error", addr)
		}
	}
	if _, err := New(Options{ProcRoot: "testdata/proc", DockerSocket: "ftp://x"}); err == nil {
		t.Error("New with a malformed docker socket: no error")
	}
}

func TestEnrichWithDocker(t *testing.T) {
	fd := newFakeDocker(t, map[string]dockerInspect{
		fixtureDockerID: inspect("trainer-1", "train:v1", map[string]string{"com.docker.compose.project": "ml", "com.docker.compose.service": "trainer"}),
		fixturePodmanID: inspect("pod-man", "localhost/x:1", nil),
	})
	a := newFixtureAttributor(t, Options{DockerSocket: "unix://" + fd.socket})
	s := &snapshot.Snapshot{Processes: []snapshot.Process{
		{GPU: 0, PID: 1001}, {GPU: 1, PID: 1001}, {GPU: 0, PID: 1018}, {GPU: 0, PID: 1014}, {GPU: 0, PID: 1029},
	}}
	a.Enrich(context.Background(), s)

	want := snapshot.Container{Runtime: RuntimeDocker, ID: fixtureDockerID, Name: "trainer-1", Image: "train:v1", ComposeProject: "ml", ComposeService: "trainer"}
	for _, i := range []int{0, 1} {
		if got := s.Processes[i].Owner.Container; got != want {
			t.Errorf("process %d: got %+v\nwant %+v", i, got, want)
		}
	}
	if got := s.Processes[2].Owner.Container; got.Name != "pod-man" || got.Image != "localhost/x:1" || got.Runtime != RuntimePodman {
		t.Errorf("podman container: got %+v", got)
	}
	if got := s.Processes[3].Owner.Container; got.Name != "" || got.ID != fixtureCRIOID {
		t.Errorf("CRI-O container must not be asked of the Docker API: got %+v", got)
	}
	if calls := fd.calls.Load(); calls != 2 {
		t.Errorf("docker API calls = %d, want 2 (one per unique container)", calls)
	}
	if n, ok := s.AttributionErrors[SourceDocker]; !ok || n != 0 {
		t.Errorf("docker errors = %d (present %v), want 0", n, ok)
	}

	// Warm: no further calls.
	s2 := &snapshot.Snapshot{Processes: []snapshot.Process{{PID: 1001}, {PID: 1018}}}
	a.Enrich(context.Background(), s2)
	if calls := fd.calls.Load(); calls != 2 {
		t.Errorf("docker API calls after a warm Enrich = %d, want 2", calls)
	}
	if s2.Processes[0].Owner.Container != want {
		t.Errorf("warm: got %+v", s2.Processes[0].Owner.Container)
	}
}

func TestEnrichUnknownContainerIsNegativeCached(t *testing.T) {
	fd := newFakeDocker(t, nil)
	a := newFixtureAttributor(t, Options{DockerSocket: "unix://" + fd.socket, NegativeCacheTTL: time.Minute})
	clock := newFakeClock()
	a.now = clock.Now
	s := &snapshot.Snapshot{Processes: []snapshot.Process{{PID: 1001}}}
	a.Enrich(context.Background(), s)
	if got := s.AttributionErrors[SourceDocker]; got != 1 {
		t.Fatalf("docker errors = %d, want 1", got)
	}
	a.Enrich(context.Background(), s)
	if calls := fd.calls.Load(); calls != 1 {
		t.Errorf("calls within the negative TTL = %d, want 1", calls)
	}
	clock.Advance(2 * time.Minute)
	a.Enrich(context.Background(), s)
	if calls := fd.calls.Load(); calls != 2 {
		t.Errorf("calls after the negative TTL = %d, want 2", calls)
	}
}

func TestEnrichAbsentSocket(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "absent.sock")
	a := newFixtureAttributor(t, Options{DockerSocket: socket, Timeout: 500 * time.Millisecond})
	s := &snapshot.Snapshot{Processes: []snapshot.Process{{PID: 1001}, {PID: 1002}, {PID: 1018}}}
	a.Enrich(context.Background(), s)
	if got := s.Processes[0].Owner.Container; got.ID != fixtureDockerID || got.Name != "" {
		t.Errorf("got %+v, want the id from the cgroup and no name", got)
	}
	if got := s.AttributionErrors[SourceDocker]; got == 0 {
		t.Error("an absent socket counted no error")
	}
	// The source is now left alone: a new container costs nothing and is
	// not counted again.
	before := s.AttributionErrors[SourceDocker]
	s2 := &snapshot.Snapshot{Processes: []snapshot.Process{{PID: 1003}}}
	a.Enrich(context.Background(), s2)
	if got := s2.AttributionErrors[SourceDocker]; got != before {
		t.Errorf("errors grew from %d to %d while the socket was known down", before, got)
	}
}

// TestEnrichHangingSocket: a socket that accepts and never answers must
// not hold Enrich past its budget, must be counted, and must not be asked
// again for every container during the negative period.
func TestEnrichHangingSocket(t *testing.T) {
	socket, accepted := silentSocket(t)

	// The socket's timeout is far from the budget, and the bounds below
	// sit between the two with a margin a loaded machine cannot eat.
	const timeout = 2 * time.Second
	a := newFixtureAttributor(t, Options{DockerSocket: "unix://" + socket, Timeout: timeout})
	s := &snapshot.Snapshot{Processes: []snapshot.Process{{PID: 1001}, {PID: 1002}, {PID: 1003}, {PID: 1018}}}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	a.Enrich(ctx, s)
	if took := time.Since(start); took > 100*time.Millisecond+time.Second {
		t.Errorf("Enrich took %v with a 100ms budget", took)
	}
	if s.Processes[0].Owner.Container.ID != fixtureDockerID {
		t.Errorf("cgroup attribution lost: %+v", s.Processes[0].Owner.Container)
	}

	// The lookups time out in the background and are counted.
	testenv.Eventually(t, timeout+10*time.Second, func() error {
		if a.errs.snapshot()[SourceDocker] == 0 {
			return errors.New("a hanging socket counted no error")
		}
		return nil
	})

	// Within the negative period: no waiting, no new connections.
	conns := accepted.Load()
	start = time.Now()
	s2 := &snapshot.Snapshot{Processes: []snapshot.Process{{PID: 1001}, {PID: 1004}, {PID: 1005}}}
	a.Enrich(context.Background(), s2)
	if took := time.Since(start); took > timeout/2 {
		t.Errorf("second Enrich took %v; a known-down socket must cost nothing", took)
	}
	if got := accepted.Load(); got != conns {
		t.Errorf("connections grew from %d to %d while the socket was known down", conns, got)
	}
}
