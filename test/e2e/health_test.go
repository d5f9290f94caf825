package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
