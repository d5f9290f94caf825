//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// doctorWithSMI runs `gpuwatch doctor -o json` with an nvidia-smi on PATH
// that runs body (sh), and returns the nvidia-smi results.
func doctorWithSMI(t *testing.T, body string, args ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gpuwatchBin, append([]string{"doctor", "-o", "json", "--backend=sim", "--sim.profile=h100"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	out, _ := cmd.CombinedOutput()
	var r doctorReport
	if err := json.NewDecoder(strings.NewReader(string(out))).Decode(&r); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, out)
	}
	results := map[string]string{}
	for _, c := range r.Checks {
		if strings.HasPrefix(c.Check, "nvidia-smi") {
			results[c.Check] = c.Status + ": " + c.Found + " | " + c.Fix
		}
	}
	return results
}

// TestDoctorWaitsForASlowNvidiaSMI: the nvidia-smi on PATH answers after
// 1.3 s, longer than the default --attribution.timeout (1 s); the doctor
// reads its answer (here listing another GPU) instead of calling the
// driver in trouble.
func TestDoctorWaitsForASlowNvidiaSMI(t *testing.T) {
	row := "GPU-not-this-one" + strings.Repeat(", [N/A]", 13)
	got := doctorWithSMI(t, "sleep 1.3; echo '"+row+"'")
	if r := got["nvidia-smi GPU 0"]; !strings.HasPrefix(r, "fail: nvidia-smi does not list GPU-") {
		t.Errorf("nvidia-smi GPU 0 = %q, want nvidia-smi's answer compared; all: %v", r, got)
	}
	if r, found := got["nvidia-smi"]; found {
		t.Errorf("nvidia-smi = %q, want no failure of nvidia-smi itself", r)
	}
}

// TestDoctorGivesUpOnAHungNvidiaSMI: the result names the timeout that
// was applied, --doctor.nvidia-smi-timeout.
func TestDoctorGivesUpOnAHungNvidiaSMI(t *testing.T) {
	got := doctorWithSMI(t, "sleep 300", "--doctor.nvidia-smi-timeout=2s")
	if r := got["nvidia-smi"]; !strings.HasPrefix(r, "fail: no answer within 2s |") || strings.Contains(r, "is in trouble") {
		t.Errorf("nvidia-smi = %q", r)
	}
}
