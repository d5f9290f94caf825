//go:build linux

package e2e

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

type doctorReport struct {
	Checks []struct {
		Check, Status, Found, Fix string
		Needed                    bool
	} `json:"checks"`
	Healthy bool `json:"healthy"`
}

func runDoctor(t *testing.T, args ...string) (doctorReport, string, int) {
	t.Helper()
	out, code := runGpuwatch(t, append([]string{"doctor", "-o", "json"}, args...)...)
	var r doctorReport
	// The report is all there is: an unhealthy one only sets exit status 1.
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&r); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, out)
	}
	return r, out, code
}

func (r doctorReport) status(check string) (string, string) {
	for _, c := range r.Checks {
		if c.Check == check {
			return c.Status, c.Found + " | " + c.Fix
		}
	}
	return "absent", ""
}

// TestDoctorOnTheDemo: the README's demo passes every check, exit 0; the
// text report marks each line.
func TestDoctorOnTheDemo(t *testing.T) {
	r, out, code := runDoctor(t, "--backend=sim", "--sim.profile=dgx-h100")
	if code != 0 || !r.Healthy {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, check := range []string{"driver", "GPUs", "process list", "procfs", "docker socket", "cri socket", "kubelet socket", "slurm controller", "slurm node"} {
		if st, why := r.status(check); st != "ok" {
			t.Errorf("%s: %s (%s)", check, st, why)
		}
	}
	text, code := runGpuwatch(t, "doctor", "--backend=sim", "--sim.profile=h100")
	if code != 0 || !strings.Contains(text, "✔ driver") || !strings.Contains(text, "– device nodes") {
		t.Errorf("text report (exit %d):\n%s", code, text)
	}
}

// TestDoctorNamesEachProblem: an absent CRI socket and a hung kubelet
// socket are failures with their fix, and the exit status is 1.
func TestDoctorNamesEachProblem(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	hung := filepath.Join(dir, "hung.sock")
	l, err := net.Listen("unix", hung)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	r, out, code := runDoctor(t, "--backend=sim", "--sim.profile=h100", "--path.procfs=/proc", "--docker.socket=",
		"--cri.socket="+filepath.Join(dir, "absent.sock"), "--kubelet.pod-resources-socket="+hung,
		"--slurm.jobs=false", "--attribution.timeout=500ms")
	if code != 1 || r.Healthy {
		t.Errorf("exit %d, healthy %v, want 1 and false:\n%s", code, r.Healthy, out)
	}
	if st, why := r.status("cri socket"); st != "fail" || !strings.Contains(why, "--cri.socket") {
		t.Errorf("cri: %s %s", st, why)
	}
	if st, why := r.status("kubelet socket"); st != "fail" || !strings.Contains(why, "no answer within 500ms") {
		t.Errorf("kubelet: %s %s", st, why)
	}
	if st, _ := r.status("docker socket"); st != "skip" {
		t.Errorf("docker: %s", st)
	}
	// The text report says once that a check failed; no error line repeats it.
	text, code := runGpuwatch(t, "doctor", "--backend=sim", "--sim.profile=h100", "--path.procfs=/proc", "--docker.socket=",
		"--cri.socket="+filepath.Join(dir, "absent.sock"), "--kubelet.pod-resources-socket="+hung,
		"--slurm.jobs=false", "--attribution.timeout=500ms")
	if code != 1 || strings.Count(text, "failed") != 1 || strings.Contains(text, "gpuwatch: doctor") {
		t.Errorf("text report (exit %d) should say once that checks failed:\n%s", code, text)
	}
}

// TestDoctorAgainstRealSlurm: the commands, the controller and the node
// name, checked against a running Slurm; a node name Slurm does not know
// is a failure that says to set --slurm.node-name.
func TestDoctorAgainstRealSlurm(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Slurm; skipped with -short")
	}
	cluster := testenv.StartSlurm(t, 2)
	common := []string{"--backend=sim", "--sim.profile=h100", "--path.procfs=/proc", "--docker.socket=", "--cri.socket=",
		"--kubelet.pod-resources-socket=", "--slurm.jobs=true", "--attribution.timeout=5s"}
	r, out, code := runDoctor(t, append(common, "--slurm.node-name="+cluster.Node)...)
	for _, check := range []string{"slurm commands", "slurm controller", "slurm node"} {
		if st, why := r.status(check); st != "ok" {
			t.Errorf("%s: %s (%s)\n%s", check, st, why, out)
		}
	}
	// The test cluster's gres.conf names plain files, not /dev/nvidiaN.
	if st, why := r.status("gres.conf order"); st != "skip" || !strings.Contains(why, "not a /dev/nvidiaN device file") {
		t.Errorf("gres.conf order: %s (%s)", st, why)
	}
	if code != 0 {
		t.Errorf("exit %d:\n%s", code, out)
	}
	r, out, code = runDoctor(t, append(common, "--slurm.node-name=no-such-node")...)
	if st, why := r.status("slurm node"); st != "fail" || !strings.Contains(why, "--slurm.node-name") || code != 1 {
		t.Errorf("unknown node: %s (%s), exit %d\n%s", st, why, code, out)
	}
}
