package release

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The image `make image` built: entrypoint, user, environment and OCI
// labels from its configuration, then the binary run from the image's own
// filesystem (its glibc, as its user) against the simulator. podman cannot
// start containers in this sandbox, so the image is mounted and chrooted
// into instead.
func TestImage(t *testing.T) {
	r := findRelease(t)
	requireRoot(t)
	testenv.RequireTool(t, "podman", "podman")
	podman := filepath.Join(testenv.RepoRoot(), "scripts", "release", "podman.sh")
	image := "localhost/gpuwatch:" + r.version
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(podman, args...).Output()
		if err != nil {
			if exit, ok := err.(*exec.ExitError); ok {
				out = append(out, exit.Stderr...)
			}
			t.Fatalf("podman %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if err := exec.Command(podman, "image", "exists", image).Run(); err != nil {
		testenv.Missing(t, image+" is not in .cache/podman; run make image")
	}

	var inspect []struct {
		Config struct {
			Entrypoint   []string
			Cmd          []string
			User         string
			Env          []string
			Labels       map[string]string
			ExposedPorts map[string]struct{}
		}
	}
	if err := json.Unmarshal([]byte(run("image", "inspect", image)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v (%d images)", err, len(inspect))
	}
	cfg := inspect[0].Config
	if !slices.Equal(cfg.Entrypoint, []string{"/usr/bin/gpuwatch"}) || !slices.Equal(cfg.Cmd, []string{"serve"}) {
		t.Errorf("entrypoint %q cmd %q, want [/usr/bin/gpuwatch] [serve]", cfg.Entrypoint, cfg.Cmd)
	}
	if cfg.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", cfg.User)
	}
	if !slices.Contains(cfg.Env, "NVIDIA_DRIVER_CAPABILITIES=utility") {
		t.Errorf("env %q lacks NVIDIA_DRIVER_CAPABILITIES=utility", cfg.Env)
	}
	if _, ok := cfg.ExposedPorts["9410/tcp"]; !ok {
		t.Errorf("exposed ports %v lack 9410/tcp", cfg.ExposedPorts)
	}
	for key, want := range map[string]string{
		"org.opencontainers.image.title":    "gpuwatch",
		"org.opencontainers.image.version":  r.version,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.source":   "https://github.com/gpuwatch/gpuwatch",
	} {
		if got := cfg.Labels[key]; got != want {
			t.Errorf("label %s=%q, want %q", key, got, want)
		}
	}
	if rev := cfg.Labels["org.opencontainers.image.revision"]; rev == "" || rev == "unknown" {
		t.Errorf("label org.opencontainers.image.revision=%q, want the commit", rev)
	}

	rootfs := strings.TrimSpace(run("image", "mount", image))
	t.Cleanup(func() { _ = exec.Command(podman, "image", "unmount", image).Run() })

	port := testenv.FreePort(t)
	argv := append(append(slices.Clone(cfg.Entrypoint), cfg.Cmd...),
		"--backend=sim", "--sim.profile=h100", "--web.listen-address=127.0.0.1:"+strconv.Itoa(port))
	cmd := chrootCommand(context.Background(), rootfs, t.TempDir(), []string{"--userspec", cfg.User}, argv...)
	checkSimPage(t, serveSim(t, cmd, port, nil), r.version)
}
