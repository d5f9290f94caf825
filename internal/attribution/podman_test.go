package attribution

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// podman runs podman on a private store, so that the test neither sees nor
// disturbs the host's containers.
type podmanCLI struct {
	bin   string
	flags []string
}

func (p podmanCLI) cmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, p.bin, append(append([]string{}, p.flags...), args...)...)
}

func (p podmanCLI) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := p.cmd(ctx, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPodmanDockerAPI resolves a container created by a real Podman through
// Podman's Docker-compatible API service, both directly and through Enrich
// for a process whose cgroup names that container. Containers can be
// created here but not started, so the process is a fixture.
func TestPodmanDockerAPI(t *testing.T) {
	bin := testenv.RequireTool(t, "podman", "podman")
	busybox := "/bin/busybox"
	if _, err := os.Stat(busybox); err != nil {
		testenv.RequireTool(t, "busybox-static-binary-at-/bin/busybox", "busybox-static")
	}
	dir := shortTempDir(t)
	pm := podmanCLI{bin: bin, flags: []string{
		"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
	}}

	// An image without a registry: a rootfs holding busybox.
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", "sleep")); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(dir, "rootfs.tar")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "tar", "-C", rootfs, "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	pm.run(t, "import", tarball, "localhost/gpuwatch-test:1")

	project := "ml \"team\"\nü 🚀" // passes through as it is
	id := pm.run(t, "create", "--name", "gpuwatch-trainer",
		"--label", "com.docker.compose.project="+project,
		"--label", "com.docker.compose.service=trainer",
		"localhost/gpuwatch-test:1", "/bin/sleep", "300")
	if !isContainerID(id) {
		t.Fatalf("podman create printed %q, not a container id", id)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pm.cmd(ctx, "rm", "-f", id).Run()
	})

	socket := filepath.Join(dir, "podman.sock")
	service := pm.cmd(context.Background(), "system", "service", "--time=0", "unix://"+socket)
	serviceLog := &syncBuffer{}
	service.Stdout, service.Stderr = serviceLog, serviceLog
	if err := service.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		service.Process.Kill()
		service.Wait()
	})
	waitForSocket(t, socket, 30*time.Second, serviceLog)

	want := ContainerMeta{Name: "gpuwatch-trainer", Image: "localhost/gpuwatch-test:1", ComposeProject: project, ComposeService: "trainer"}
	r, err := NewDockerResolver("unix://"+socket, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	got, err := r.Resolve(rctx, id)
	if err != nil {
		t.Fatalf("resolve %s: %v\nservice log:\n%s", id, err, serviceLog)
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

func waitForSocket(t *testing.T, socket string, limit time.Duration, log *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("unix", socket, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("podman service did not listen on %s within %v: %v\n%s", socket, limit, errors.Unwrap(err), log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncBuffer collects a subprocess's output while the test may read it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
