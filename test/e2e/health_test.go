//go:build linux

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/health"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestHealthPolicyIsCheckedAtStart: a bad --health.policy stops every
// command at start with one line naming the flag, the file, the line and
// the field; nothing is served or written.
func TestHealthPolicyIsCheckedAtStart(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	writeFile(t, policy, "checks:\n  nvlink_down: warn\n  xid: loud\n")
	out := filepath.Join(dir, "x.prom")
	for _, args := range [][]string{
		{"--web.listen-address=127.0.0.1:0"},
		{"textfile", "--output=" + out},
		{"ps"},
	} {
		args = append(args, "--backend=sim", "--sim.profile=h100", "--health.policy="+policy)
		got, code := runGpuwatch(t, args...)
		want := `--health.policy: ` + policy + `: line 3: checks.xid: "loud" is not a level (off, warn or fail)`
		if code == 0 || strings.TrimSpace(got) != "gpuwatch: "+want {
			t.Errorf("%v: exit %d, output %q; want one line %q", args, code, got, want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("textfile wrote %s despite the bad policy", out)
	}
	got, code := runGpuwatch(t, "ps", "--backend=sim", "--health.expect-gpus=2000")
	if code == 0 || !strings.Contains(got, "--health.expect-gpus=2000: must be 0") {
		t.Errorf("expect-gpus 2000: exit %d, %q", code, got)
	}
}

// healthReport fetches base/api/v1/health.
func healthReport(t *testing.T, base string) health.Report {
	t.Helper()
	var r health.Report
	if err := json.Unmarshal([]byte(httpGet(t, base+"/api/v1/health")), &r); err != nil {
		t.Fatalf("/api/v1/health: %v", err)
	}
	return r
}

// TestHealthOnSimulatedFaults: the simulator's faults through serve. An
// XID 79 fails its GPU, with the reason; an application XID 13 does not; a
// lost GPU fails; a hung GPU is unknown, not failed, and makes /readyz
// 503, saying which GPU has no fresh reading. The verdicts are in
// /api/v1/health and /metrics alike.
func TestHealthOnSimulatedFaults(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, `profile: dgx-h100
faults:
  - {gpu: 2, xid: 79, at: 1s}
  - {gpu: 3, xid: 13, at: 1s}
  - {gpu: 4, lost_after: 1s}
  - {gpu: 5, hang_after: 2s, hang_for: 60s}
`)
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+cfg, "--collection.timeout=1s", "--no-web.ui")
	var r health.Report
	testenv.WaitFor(t, 30*time.Second, "GPU 2 failed, GPU 4 lost and GPU 5 unknown in /api/v1/health", func() bool {
		r = healthReport(t, base)
		return len(r.GPUs) == 8 && r.GPUs[2].Status == "fail" && r.GPUs[4].Status == "fail" && r.GPUs[5].Status == "unknown"
	})
	if !strings.Contains(r.GPUs[2].Reason, "GPU 2 (GPU-") || !strings.Contains(r.GPUs[2].Reason, "XID 79 (at ") ||
		!strings.Contains(r.GPUs[2].Reason, "GPU has fallen off the bus; drain the node and reboot it") {
		t.Errorf("GPU 2's reason = %q", r.GPUs[2].Reason)
	}
	if !strings.Contains(r.GPUs[4].Reason, "lost (gpu_is_lost)") {
		t.Errorf("GPU 4's reason = %q", r.GPUs[4].Reason)
	}
	if !strings.Contains(r.GPUs[5].Reason, "did not answer in time") {
		t.Errorf("GPU 5's reason = %q", r.GPUs[5].Reason)
	}
	for _, gpu := range []int{0, 1, 3, 6, 7} {
		if r.GPUs[gpu].Status != "ok" {
			t.Errorf("GPU %d = %s %q, want ok (GPU 3's XID 13 is the application's)", gpu, r.GPUs[gpu].Status, r.GPUs[gpu].Reason)
		}
	}
	if r.Status != "fail" {
		t.Errorf("node status = %s", r.Status)
	}
	fams := testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
	for gpu, want := range map[string]float64{"0": 1, "2": 0, "3": 1, "4": 0} {
		if v, ok := testenv.Sample(fams, "gpu_health_status", map[string]string{"gpu": gpu}); !ok || v != want {
			t.Errorf("gpu_health_status{gpu=%s} = %v (present %v), want %v", gpu, v, ok, want)
		}
	}
	if _, ok := testenv.Sample(fams, "gpu_health_status", map[string]string{"gpu": "5"}); ok {
		t.Errorf("gpu_health_status of the hung GPU 5 is present; unknown must be absent")
	}
	if v, ok := testenv.Sample(fams, "gpu_health_check_failing", map[string]string{"gpu": "2", "check": "xid"}); !ok || v != 1 {
		t.Errorf("gpu_health_check_failing{gpu=2,check=xid} = %v %v", v, ok)
	}
	if v, ok := testenv.Sample(fams, "gpu_health_check_failing", map[string]string{"gpu": "5", "check": "responding"}); !ok || v != 1 {
		t.Errorf("gpu_health_check_failing{gpu=5,check=responding} = %v %v", v, ok)
	}
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "not ready: no fresh reading of GPU 5: not answering") {
		t.Errorf("/readyz with GPU 5 hung = %s %q", resp.Status, body)
	}
}

// TestHealthThroughFakeNVML: the same verdicts through the real cgo path,
// gpuwatch on the fake libnvidia-ml.so.1: an XID 79 fails its GPU in
// /api/v1/health and gpu_health_status.
func TestHealthThroughFakeNVML(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, "R580", "profile: dgx-h100\nfaults:\n  - {gpu: 1, xid: 79, at: 1s}\n")
	base, p, ok := startWithEnv(t, env, isolated(t)...)
	if !ok {
		t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
	}
	var r health.Report
	testenv.WaitFor(t, 30*time.Second, "GPU 1 failed in /api/v1/health", func() bool {
		r = healthReport(t, base)
		return len(r.GPUs) == 8 && r.GPUs[1].Status == "fail"
	})
	if !strings.Contains(r.GPUs[1].Reason, "XID 79") || r.GPUs[0].Status != "ok" {
		t.Errorf("verdicts = %+v", r.GPUs[:2])
	}
	fams := testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
	if v, ok := testenv.Sample(fams, "gpu_health_status", map[string]string{"gpu": "1"}); !ok || v != 0 {
		t.Errorf("gpu_health_status{gpu=1} = %v %v", v, ok)
	}
	if _, err := httpGetNoFail(base + "/readyz"); err != nil {
		t.Errorf("/readyz with every GPU answering: %v", err)
	}
}

// TestHealthCommandExitCodes: `gpuwatch health` reads the GPUs itself and
// exits 0 when every GPU is fit, 1 when one failed (a lost GPU), 2 when
// health cannot be told (a hung GPU, or no driver); -o json is the
// /api/v1/health document.
func TestHealthCommandExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lost := filepath.Join(dir, "lost.yaml")
	writeFile(t, lost, "profile: dgx-h100\nfaults:\n  - {gpu: 4, lost_after: 0s}\n")
	hung := filepath.Join(dir, "hung.yaml")
	writeFile(t, hung, "profile: h100\nfaults:\n  - {gpu: 0, hang_after: 0s, hang_for: 60s}\n")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"healthy", []string{"--backend=sim", "--sim.profile=dgx-h100"}, 0, "OK\nsource: local"},
		{"lost GPU", []string{"--backend=sim", "--sim.config=" + lost}, 1,
			"FAIL: GPU 4 (UUID unknown): lost (gpu_is_lost); reboot the node"},
		{"hung GPU", []string{"--backend=sim", "--sim.config=" + hung, "--collection.timeout=1s"}, 2,
			"UNKNOWN: GPU 0 (UUID unknown): did not answer in time"},
		{"no driver", []string{"--backend=nvml"}, 2, "gpuwatch: health unknown: "},
	}
	for _, c := range cases {
		if _, err := os.Stat("/dev/nvidiactl"); err == nil && c.name == "no driver" {
			continue // an NVIDIA GPU is present on this machine
		}
		out, code := runGpuwatch(t, append([]string{"health", "--health.source=local"}, c.args...)...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, want %d; output:\n%s\nwant it to contain %q", c.name, code, c.code, out, c.want)
		}
	}
	cmd := exec.Command(gpuwatchBin, "health", "--health.source=local", "--backend=sim", "--sim.config="+lost, "-o", "json")
	stdout, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("health -o json with a lost GPU: %v", err)
	}
	var r health.Report
	if err := json.Unmarshal(stdout, &r); err != nil {
		t.Fatalf("health -o json: %v\n%s", err, stdout)
	}
	if r.Status != "fail" || len(r.GPUs) != 8 || r.GPUs[4].Status != "fail" || r.GPUs[0].Status != "ok" {
		t.Errorf("report = %+v", r)
	}
}
