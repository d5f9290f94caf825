//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// Simulated hosts for the health gate: GPU 3 fell off the bus (XID 79,
// and the driver reports it lost from then on), a hung GPU (health
// unknown), and a healthy host.
const (
	simFallenOffTheBus = "profile: dgx-h100\nfaults:\n  - {gpu: 3, xid: 79, at: 0s}\n  - {gpu: 3, lost_after: 0s}\n"
	simHungGPU         = "profile: dgx-h100\nfaults:\n  - {gpu: 0, hang_after: 0s, hang_for: 60s}\n"
	simHealthy         = "profile: dgx-h100\n"
)

// nodeStateReason is the node's state and reason as scontrol reports
// them, without the NOT_RESPONDING flag: slurmd on a busy test machine
// may miss a ping of the controller's, which is not what these tests test
// (the gate drains and resumes such a node alike).
func nodeStateReason(t *testing.T, s *testenv.Slurm) (state, reason string) {
	t.Helper()
	for line := range strings.SplitSeq(s.Run(t, "scontrol", "show", "node", s.Node), "\n") {
		line = strings.TrimSpace(line)
		if r, ok := strings.CutPrefix(line, "Reason="); ok {
			reason = r
		}
		for f := range strings.FieldsSeq(line) {
			if v, ok := strings.CutPrefix(f, "State="); ok {
				state = strings.ReplaceAll(v, "+NOT_RESPONDING", "")
			}
		}
	}
	return state, reason
}

// TestHealthDrainsAndResumesASlurmNode: `gpuwatch health --slurm.drain
// --slurm.resume` against a real single-node Slurm (22.05 here: scontrol
// has no --json, so the text form is read). A GPU fallen off the bus
// drains the node with gpuwatch's reason, shown by sinfo -R; a second run
// changes nothing; unknown health (a hung GPU) changes nothing; health
// resumes it. A node an admin drained stays drained whatever the verdict,
// and without the flags nothing is drained.
func TestHealthDrainsAndResumesASlurmNode(t *testing.T) {
	s := testenv.StartSlurm(t, 2)
	dir := t.TempDir()
	cfg := map[string]string{}
	for name, content := range map[string]string{"fallen": simFallenOffTheBus, "hung": simHungGPU, "healthy": simHealthy} {
		cfg[name] = filepath.Join(dir, name+".yaml")
		writeFile(t, cfg[name], content)
	}
	healthAs := func(node, sim string, extra ...string) (string, int) {
		t.Helper()
		args := append([]string{"health", "--backend=sim", "--sim.config=" + cfg[sim], "--collection.timeout=1s",
			"--health.source=local", "--health.kernel-log=", "--slurm.node-name=" + node, "-o", "line"}, extra...)
		return runGpuwatch(t, args...)
	}
	health := func(sim string, extra ...string) (string, int) {
		t.Helper()
		return healthAs(s.Node, sim, extra...)
	}
	gate := []string{"--slurm.drain", "--slurm.resume"}
	const reason = "gpuwatch: GPU 3 gpu_lost"

	out, code := health("fallen", "--slurm.resume")
	if state, _ := nodeStateReason(t, s); code != 1 || state != "IDLE" || !strings.Contains(out, "unchanged: not asked") {
		t.Fatalf("failed GPU with --slurm.resume only: exit %d, node %s; output:\n%s", code, state, out)
	}

	out, code = health("fallen", gate...)
	state, got := nodeStateReason(t, s)
	if code != 1 || state != "IDLE+DRAIN" || !strings.HasPrefix(got, reason+" [root@") {
		t.Fatalf("failed GPU: exit %d, node %s reason %q; want 1, IDLE+DRAIN, %q; output:\n%s", code, state, got, reason, out)
	}
	if !strings.Contains(out, "FAIL: GPU 3") || !strings.Contains(out, "slurm: node "+s.Node+" drained (was IDLE)") {
		t.Errorf("output of the drain:\n%s", out)
	}
	if r := s.Run(t, "sinfo", "-R", "-h", "-o", "%E|%N"); r != reason+"|"+s.Node {
		t.Errorf("sinfo -R: %q, want %q", r, reason+"|"+s.Node)
	}
	out, code = health("fallen", gate...)
	if _, again := nodeStateReason(t, s); code != 1 || again != got || !strings.Contains(out, "unchanged: already drained by gpuwatch") {
		t.Errorf("second run: exit %d, reason %q (was %q); output:\n%s", code, again, got, out)
	}
	out, code = health("hung", gate...)
	if state, again := nodeStateReason(t, s); code != 2 || state != "IDLE+DRAIN" || again != got {
		t.Errorf("unknown health: exit %d, node %s %q; want 2 and the node as it was; output:\n%s", code, state, again, out)
	}
	// An error reading the node: exit 2, nothing changed (this scontrol has no --json).
	out, code = health("healthy", append(gate, "--slurm.format=json")...)
	if state, _ := nodeStateReason(t, s); code != 2 || state != "IDLE+DRAIN" || !strings.Contains(out, "unrecognized option") {
		t.Errorf("--slurm.format=json on Slurm 22.05: exit %d, node %s; output:\n%s", code, state, out)
	}
	out, code = health("healthy", gate...)
	if state, r := nodeStateReason(t, s); code != 0 || state != "IDLE" || r != "" || !strings.Contains(out, "resumed (was IDLE+DRAIN)") {
		t.Errorf("healthy again: exit %d, node %s %q; want 0, IDLE, no reason; output:\n%s", code, state, r, out)
	}

	// An admin's drain is the admin's: neither a failure nor health touches it.
	s.Run(t, "scontrol", "update", "NodeName="+s.Node, "State=DRAIN", "Reason=bad DIMM B2")
	for _, sim := range []string{"healthy", "fallen"} {
		out, code = health(sim, gate...)
		if state, r := nodeStateReason(t, s); state != "IDLE+DRAIN" || !strings.HasPrefix(r, "bad DIMM B2 [") ||
			!strings.Contains(out, "drained by someone else") || code == 2 {
			t.Errorf("admin's drain, %s GPUs: exit %d, node %s %q; output:\n%s", sim, code, state, r, out)
		}
	}
	s.Run(t, "scontrol", "update", "NodeName="+s.Node, "State=RESUME")

	// A node name that is not one node is refused before anything runs.
	out, code = healthAs(s.Node+",other", "fallen", "--slurm.drain")
	if state, _ := nodeStateReason(t, s); code != 2 || state != "IDLE" || !strings.Contains(out, "--slurm.node-name: node name") {
		t.Errorf("host list as node name: exit %d, node %s; output:\n%s", code, state, out)
	}
}

// healthcheckEnv runs the shipped HealthCheckProgram as slurmd does: a bare
// environment (slurmd passes SLURMD_NODENAME) but for the settings file's
// path, which names this test's file.
func runHealthcheckScript(t *testing.T, conf, node string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "deploy", "slurm", "gpuwatch-healthcheck.sh"))
	cmd.Env = []string{"SLURMD_NODENAME=" + node, "GPUWATCH_HEALTHCHECK_CONF=" + conf}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gpuwatch-healthcheck.sh: %v", err)
	}
	return string(out), code
}

// TestHealthcheckScriptDrainsAndResumes: the shipped HealthCheckProgram
// with its settings file drains and resumes the single-node Slurm; a
// settings file others may write is not read, and nothing changes.
func TestHealthcheckScriptDrainsAndResumes(t *testing.T) {
	s := testenv.StartSlurm(t, 2)
	dir := t.TempDir()
	sim := filepath.Join(dir, "sim.yaml")
	writeFile(t, sim, simFallenOffTheBus)
	conf := filepath.Join(dir, "gpuwatch-healthcheck")
	// SLURM_CONF: slurmd gives the program none; the settings file does.
	writeFile(t, conf, "GPUWATCH_BIN="+gpuwatchBin+"\nGPUWATCH_HEALTH_OPTS=\"--backend=sim --sim.config="+sim+" --collection.timeout=1s --health.source=local --health.kernel-log=\"\nSLURM_CONF="+s.Conf+"\n")

	out, code := runHealthcheckScript(t, conf, s.Node)
	if state, r := nodeStateReason(t, s); code != 1 || state != "IDLE+DRAIN" || !strings.HasPrefix(r, "gpuwatch: GPU 3 gpu_lost [") {
		t.Fatalf("fallen GPU: exit %d, node %s %q; output:\n%s", code, state, r, out)
	}
	writeFile(t, sim, simHealthy)
	if err := os.Chmod(conf, 0o666); err != nil {
		t.Fatal(err)
	}
	out, code = runHealthcheckScript(t, conf, s.Node)
	if state, _ := nodeStateReason(t, s); code != 2 || state != "IDLE+DRAIN" || !strings.Contains(out, "must belong to root and be writable by root alone") {
		t.Errorf("settings file writable by all: exit %d, node %s; output:\n%s", code, state, out)
	}
	if err := os.Chmod(conf, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = runHealthcheckScript(t, conf, s.Node)
	if state, _ := nodeStateReason(t, s); code != 0 || state != "IDLE" {
		t.Errorf("healthy: exit %d, node %s; output:\n%s", code, state, out)
	}
}

// TestNHCCheckGpuwatch: the shipped NHC check function, in bash with NHC's
// die and log stubbed as NHC defines them (die RC MESSAGE fails the check
// with MESSAGE as the node's reason): a failed GPU dies with gpuwatch's
// reason on one line, a healthy host passes, unknown health logs and passes.
func TestNHCCheckGpuwatch(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "bash", "bash")
	dir := t.TempDir()
	nhc := filepath.Join(testenv.RepoRoot(), "deploy", "slurm", "nhc", "gpuwatch.nhc")
	cases := []struct {
		sim, want string
	}{
		{simFallenOffTheBus, "DIE 1 gpuwatch: GPU 3 (UUID unknown): lost (gpu_is_lost); reboot the node"},
		{simHealthy, "RC 0"},
		{simHungGPU, "LOG check_gpuwatch: GPU health unknown (gpuwatch health exit 2): UNKNOWN: GPU 0"},
	}
	for i, c := range cases {
		sim := filepath.Join(dir, strconv.Itoa(i)+".yaml")
		writeFile(t, sim, c.sim)
		script := `die() { echo "DIE $1 $2"; return "$1"; }
log() { echo "LOG $*"; }
. "$1"
GPUWATCH_BIN=$2 check_gpuwatch --backend=sim "--sim.config=$3" --collection.timeout=1s --health.source=local --health.kernel-log=
echo "RC $?"`
		out, err := exec.Command("bash", "-c", script, "nhc-test", nhc, gpuwatchBin, sim).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if !strings.HasPrefix(lines[0], c.want) {
			t.Errorf("%q: output\n%s\nwant the first line to start with %q", c.sim, out, c.want)
		}
		wantRC := "RC 0"
		if strings.HasPrefix(c.want, "DIE") {
			wantRC = "RC 1"
		}
		if last := lines[len(lines)-1]; last != wantRC || len(lines) > 2 || (c.want == "RC 0" && len(lines) != 1) {
			t.Errorf("%q: output\n%s\nwant one message line at most, then %s", c.sim, out, wantRC)
		}
		if len(lines[0]) > len("DIE 1 gpuwatch: ")+160 {
			t.Errorf("%q: message of %d bytes", c.sim, len(lines[0]))
		}
	}
}
