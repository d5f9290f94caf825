package testenv

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Podman is a Podman on a private store with its Docker-compatible API
// service listening on a unix socket. Containers can be created here, not
// started (the sandbox refuses setrlimit), which is all name resolution
// needs.
type Podman struct {
	Socket string // path of the API socket
	bin    string
	flags  []string
}

// ShortTempDir is a temporary directory with a short path: unix socket
// paths must fit in 108 bytes, which t.TempDir() can exceed.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// StartPodman makes an image from Debian's busybox without a registry and
// starts `podman system service` on a temporary socket; both go away when
// the test ends.
func StartPodman(t *testing.T) *Podman {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: real Podman not started")
	}
	bin := RequireTool(t, "podman", "podman")
	if _, err := os.Stat("/bin/busybox"); err != nil {
		Missing(t, "/bin/busybox not found; install the Debian package busybox-static")
	}
	dir := ShortTempDir(t)
	p := &Podman{Socket: filepath.Join(dir, "podman.sock"), bin: bin, flags: []string{
		"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
	}}

	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin", "busybox"), busybox, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", "sleep")); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(dir, "rootfs.tar")
	run(t, "tar", "-C", rootfs, "-cf", tarball, ".")
	p.Run(t, "import", tarball, "localhost/gpuwatch-test:1")

	service := p.command(context.Background(), "system", "service", "--time=0", "unix://"+p.Socket)
	log := &SyncBuffer{}
	service.Stdout, service.Stderr = log, log
	if err := service.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = service.Process.Kill(); _ = service.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("unix", p.Socket, time.Second)
		if err == nil {
			c.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("podman system service did not listen on %s: %v\n%s", p.Socket, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Image is the image StartPodman imported.
const Image = "localhost/gpuwatch-test:1"

// Create creates (does not start) a container running sleep from Image
// with the given labels, and returns its 64-hex id.
func (p *Podman) Create(t *testing.T, name string, labels map[string]string) string {
	t.Helper()
	args := []string{"create", "--name", name}
	for k, v := range labels {
		args = append(args, "--label", k+"="+v)
	}
	id := p.Run(t, append(args, Image, "/bin/sleep", "300")...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = p.command(ctx, "rm", "-f", id).Run()
	})
	return id
}

// Run runs podman on the private store and returns its trimmed output.
func (p *Podman) Run(t *testing.T, args ...string) string {
	t.Helper()
	return run(t, p.bin, append(append([]string{}, p.flags...), args...)...)
}

func (p *Podman) command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, p.bin, append(append([]string{}, p.flags...), args...)...)
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
