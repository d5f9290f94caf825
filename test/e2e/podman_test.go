//go:build linux

package e2e

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestPodmanContainerNames resolves container names through a real Podman
// API service. Podman can create containers here but not start them, so the
// GPU process is a fixture /proc entry whose cgroup names the created
// container, in Podman's own libpod-ID.scope layout.
func TestPodmanContainerNames(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Podman; skipped with -short")
	}
	podman := testenv.StartPodman(t)
	name := "trainer \"a\" ü" // quotes and unicode pass through to labels
	id := podman.Create(t, "gpuwatch-trainer", map[string]string{
		"com.docker.compose.project": "vision",
		"com.docker.compose.service": name,
	})

	proc := filepath.Join(t.TempDir(), "proc")
	const pid = "1018"
	testenv.CopyDir(t, filepath.Join(fixtureProc, pid), filepath.Join(proc, pid))
	writeFile(t, filepath.Join(proc, pid, "cgroup"), "0::/machine.slice/libpod-"+id+".scope/container\n")
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: h100\npin_time: 1h\nprocesses:\n  - {gpu: 0, pid: "+pid+", used_memory_bytes: 1073741824}\n")
	common := []string{"--backend=sim", "--sim.config=" + cfg, "--path.procfs=" + proc,
		"--docker.socket=unix://" + podman.Socket, "--slurm.jobs=false", "--attribution.timeout=5s"}

	out, code := runGpuwatch(t, append([]string{"ps", "-o", "json", "--log.level=warn"}, common...)...)
	if code != 0 {
		t.Fatalf("gpuwatch ps: %s", out)
	}
	var doc struct {
		Processes []struct {
			Container struct {
				Runtime        string `json:"runtime"`
				ID             string `json:"id"`
				Name           string `json:"name"`
				Image          string `json:"image"`
				ComposeProject string `json:"compose_project"`
				ComposeService string `json:"compose_service"`
			} `json:"container"`
		} `json:"processes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Processes) != 1 {
		t.Fatalf("ps JSON (%v):\n%s", err, out)
	}
	c := doc.Processes[0].Container
	if c.Runtime != "podman" || c.ID != id || c.Name != "gpuwatch-trainer" || c.Image != testenv.Image ||
		c.ComposeProject != "vision" || c.ComposeService != name {
		t.Errorf("ps container = %+v", c)
	}

	base, _ := startGpuwatch(t, common...)
	fams := testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
	// The compose labels reach the series, so PromQL can sum per compose service.
	owner := map[string]string{"gpu": "0", "container": "gpuwatch-trainer", "compose_project": "vision", "compose_service": name}
	if v, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", owner); !ok || v != 1<<30 {
		t.Errorf("gpu_process_memory_used_bytes%v = %v (present %v)", owner, v, ok)
	}
	if v, ok := testenv.Sample(fams, "gpuwatch_attribution_errors_total", map[string]string{"source": "docker"}); !ok || v != 0 {
		t.Errorf("docker errors = %v (present %v)", v, ok)
	}
}
