// Package release checks what `make release` and `make image` built, as a
// user would get it: the binaries' glibc needs, the binary serving the
// simulator on Debian 11, the .deb installed into a clean debootstrap root,
// the .rpm's files and scripts, the systemd unit, and the container image.
//
// The artifacts come from dist/ (GPUWATCH_DIST overrides), the Debian roots
// from .cache/rootfs (ROOTFS_DIR overrides). Missing ones skip the tests
// with what to run, and fail them under CI=true.
package release

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

var arches = []string{"amd64", "arm64"}

// release is one `make release` output directory.
type release struct {
	dist    string
	version string
}

func findRelease(t *testing.T) release {
	t.Helper()
	if testing.Short() {
		t.Skip("release artifacts are checked in the full run, after make release")
	}
	dist := os.Getenv("GPUWATCH_DIST")
	if dist == "" {
		dist = filepath.Join(testenv.RepoRoot(), "dist")
	}
	sums, err := filepath.Glob(filepath.Join(dist, "gpuwatch-*.linux-amd64"))
	if err != nil || len(sums) == 0 {
		testenv.Missing(t, "no release in "+dist+"; run make release (as root)")
	}
	if len(sums) != 1 {
		t.Fatalf("%s holds %d releases, want 1: %v", dist, len(sums), sums)
	}
	name := filepath.Base(sums[0])
	version := strings.TrimSuffix(strings.TrimPrefix(name, "gpuwatch-"), ".linux-amd64")
	return release{dist: dist, version: version}
}

func (r release) binary(arch string) string {
	return filepath.Join(r.dist, fmt.Sprintf("gpuwatch-%s.linux-%s", r.version, arch), "gpuwatch")
}

// rpmArch is the architecture name rpm uses for a Go one.
var rpmArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}

func (r release) deb(arch string) string {
	return filepath.Join(r.dist, fmt.Sprintf("gpuwatch_%s_%s.deb", r.version, arch))
}

func (r release) rpm(arch string) string {
	return filepath.Join(r.dist, fmt.Sprintf("gpuwatch-%s-1.%s.rpm", r.version, rpmArch[arch]))
}

// cleanRoot is the minbase Debian 11 root of scripts/release/rootfs.sh. The
// tests never write to it: they run in an overlay on top.
func cleanRoot(t *testing.T) string {
	t.Helper()
	requireRoot(t)
	dir := os.Getenv("ROOTFS_DIR")
	if dir == "" {
		dir = filepath.Join(testenv.RepoRoot(), ".cache", "rootfs")
	}
	root := filepath.Join(dir, "bullseye")
	if _, err := os.Stat(filepath.Join(root, ".complete")); err != nil {
		testenv.Missing(t, "no Debian root at "+root+"; run scripts/release/rootfs.sh (make release does)")
	}
	return root
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "chroot and mounts need root")
	}
	testenv.RequireTool(t, "unshare", "util-linux")
}

// chrootCommand runs argv in root through scripts/release/chroot-run.sh
// (private mount namespace, overlay on upper, /proc mounted).
func chrootCommand(ctx context.Context, root, upper string, opts []string, argv ...string) *exec.Cmd {
	args := append([]string{"--overlay", upper}, opts...)
	args = append(args, root, "--")
	args = append(args, argv...)
	return exec.CommandContext(ctx, filepath.Join(testenv.RepoRoot(), "scripts", "release", "chroot-run.sh"), args...)
}

// inRoot runs argv in root and returns its output, failing the test with
// that output if it exits non-zero.
func inRoot(t *testing.T, root, upper string, opts []string, argv ...string) string {
	t.Helper()
	out, err := tryInRoot(root, upper, opts, argv...)
	if err != nil {
		t.Fatalf("%v in %s: %v\n%s", argv, root, err, out)
	}
	return out
}

// tryInRoot is inRoot for commands expected to fail.
func tryInRoot(root, upper string, opts []string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := chrootCommand(ctx, root, upper, opts, argv...).CombinedOutput()
	return string(out), err
}

// serveSim starts cmd (a gpuwatch serving the simulated H100 on port),
// waits for /metrics and returns the page. The process is stopped before
// serveSim returns; onRunning is called with its PID while it serves.
func serveSim(t *testing.T, cmd *exec.Cmd, port int, onRunning func(pid int)) string {
	t.Helper()
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("gpuwatch exited before serving: %v\n%s", err, log.String())
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			body, readErr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if readErr == nil && resp.StatusCode == http.StatusOK {
				if onRunning != nil {
					onRunning(cmd.Process.Pid)
				}
				return string(body)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gpuwatch did not serve %s within 60s: %v\n%s", url, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkSimPage asserts the page is the simulated H100's, from this release.
func checkSimPage(t *testing.T, page, version string) {
	t.Helper()
	for _, want := range []string{
		`gpu_up{gpu="0"`,
		`name="NVIDIA H100 80GB HBM3"`,
		`version="` + version + `"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for line := range strings.SplitSeq(page, "\n") {
		if strings.HasPrefix(line, "gpu_up{") && !strings.HasSuffix(line, " 1") {
			t.Errorf("simulated GPU is down: %s", line)
		}
	}
}
