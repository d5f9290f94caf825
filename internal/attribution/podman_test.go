package attribution

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestPodmanDockerAPI resolves a container created by a real Podman through
// Podman's Docker-compatible API service, both directly and through Enrich
// for a process whose cgroup names that container. Containers can be
// created here but not started, so the process is a fixture.
func TestPodmanDockerAPI(t *testing.T) {
	podman := testenv.StartPodman(t)
	project := "ml \"team\"\nü 🚀" // passes through as it is
	id := podman.Create(t, "gpuwatch-trainer", map[string]string{
		"com.docker.compose.project": project,
		"com.docker.compose.service": "trainer",
	})
	if !isContainerID(id) {
		t.Fatalf("podman create printed %q, not a container id", id)
	}
	socket := podman.Socket
	dir := testenv.ShortTempDir(t)

	want := ContainerMeta{Name: "gpuwatch-trainer", Image: testenv.Image, ComposeProject: project, ComposeService: "trainer"}
	r, err := NewDockerResolver("unix://"+socket, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	got, err := r.Resolve(rctx, id)
	if err != nil {
		t.Fatalf("resolve %s: %v", id, err)
	}
	if got != want {
		t.Errorf("Resolve:\n got %+v\nwant %+v", got, want)
	}

	// The whole path: a process in that container's cgroup.
	proc := filepath.Join(dir, "proc")
	copyDir(t, "testdata/proc/1018", filepath.Join(proc, "1018"))
	if err := os.WriteFile(filepath.Join(proc, "1018", "cgroup"), []byte("0::/machine.slice/libpod-"+id+".scope/container\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := newFixtureAttributor(t, Options{ProcRoot: proc, DockerSocket: "unix://" + socket, Timeout: 5 * time.Second})
	s := &snapshot.Snapshot{Processes: []snapshot.Process{{PID: 1018}}}
	a.Enrich(context.Background(), s)
	wantContainer := snapshot.Container{Runtime: RuntimePodman, ID: id, Name: want.Name, Image: want.Image, ComposeProject: project, ComposeService: "trainer"}
	if got := s.Processes[0].Owner.Container; got != wantContainer {
		t.Errorf("Enrich:\n got %+v\nwant %+v", got, wantContainer)
	}
	if n := s.AttributionErrors[SourceDocker]; n != 0 {
		t.Errorf("docker errors = %d, want 0", n)
	}
}
