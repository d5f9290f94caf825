package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// Issue 22: a driver in trouble, through the unmodified --backend=nvml
// path against the fake libnvidia-ml.so.1 (internal/fakenvml) taught
// each behaviour by its simulator config.

// doctorWithEnv runs gpuwatch doctor -o json with env and decodes its report.
func doctorWithEnv(t *testing.T, env []string, args ...string) (doctorReport, string, int) {
	t.Helper()
	out, code := runWithEnv(t, env, append([]string{"doctor", "-o", "json", "--backend=nvml"}, args...)...)
	var r doctorReport
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&r); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, out)
	}
	return r, out, code
}

// TestSickDriverDoctor: for a library that does not match the loaded
// kernel module, doctor says to reload the module or reboot, and does not
// claim that attribution or Slurm were turned off; a driver version with
// control characters is printed without them.
func TestSickDriverDoctor(t *testing.T) {
	t.Run("rm_version_mismatch", func(t *testing.T) {
		env := fakeEnv(t, "R580", "profile: h100\ninit_error: lib_rm_version_mismatch\n")
		r, out, code := doctorWithEnv(t, env, "--path.procfs=/proc")
		if code == 0 || r.Healthy {
			t.Errorf("doctor exit %d, healthy %v on a failed driver:\n%s", code, r.Healthy, out)
		}
		st, why := r.status("driver")
		if st != "fail" || !strings.Contains(strings.ToLower(why), "rm_version_mismatch") || !strings.Contains(why, "reload") || !strings.Contains(why, "reboot") {
			t.Errorf("driver: %s %s", st, why)
		}
		if strings.Contains(why, "install the NVIDIA driver") || strings.Contains(why, "--backend=sim") {
			t.Errorf("driver advice names the wrong fix: %s", why)
		}
		if strings.Contains(out, "--no-attribution") || strings.Contains(out, "Slurm job attribution is off") {
			t.Errorf("doctor claims attribution or Slurm were turned off:\n%s", out)
		}
	})
	t.Run("hostile_version", func(t *testing.T) {
		env := fakeEnv(t, "R580", "profile: h100\npin_time: 1h\ndriver_version: \"580.65.06\\n\\e[2J✘ fake\\r\"\n")
		text, _ := runWithEnv(t, env, append([]string{"doctor", "--backend=nvml"}, isolated(t)...)...)
		var line string
		for l := range strings.SplitSeq(text, "\n") {
			if strings.Contains(l, "driver ") && strings.Contains(l, "library") {
				line = l
			}
		}
		if line == "" || !strings.Contains(line, "580.65.06?") {
			t.Fatalf("no driver line with the version:\n%q", text)
		}
		if strings.ContainsAny(text, "\x1b\r") || strings.Contains(text, "\n? fake") || strings.Contains(text, "\n✘ fake") {
			t.Errorf("doctor printed the driver's control characters:\n%q", text)
		}
	})
}
