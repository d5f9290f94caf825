package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Slurm is a private single-node Slurm (munged, slurmctld, slurmd) started
// by test/slurm/start.sh in a temporary directory, with fake GPU GRES.
type Slurm struct {
	Dir  string // every file of the cluster lives here
	Conf string // its slurm.conf; SLURM_CONF points at it for the test
	Node string // the node's name (this host's name)
}

// StartSlurm starts a cluster with fakeGPUs h100 GRES and stops it when the
// test ends. It sets SLURM_CONF for the test, so every Slurm client the test
// runs (its own and gpuwatch's) talks to this cluster.
//
// Clusters of different test binaries would share this host's node name, so
// they are started one at a time: a lock file is held until cleanup.
func StartSlurm(t *testing.T, fakeGPUs int) *Slurm {
	t.Helper()
	return StartSlurmWith(t, fakeGPUs, "")
}

// StartSlurmWith is StartSlurm with lines added to slurm.conf (Epilog=,
// EpilogSlurmctld=, ...).
func StartSlurmWith(t *testing.T, fakeGPUs int, extraConf string) *Slurm {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: real Slurm not started")
	}
	for _, bin := range []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "sdiag", "scancel"} {
		RequireTool(t, bin, "slurm-wlm and munge")
	}
	if os.Geteuid() != 0 {
		Missing(t, "slurmd needs root")
	}
	lockSlurm(t)

	scripts := filepath.Join(RepoRoot(), "test", "slurm")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(scripts, "start.sh"), dir)
	cmd.Env = append(os.Environ(),
		"SLURMCTLD_PORT="+strconv.Itoa(FreePort(t)), "SLURMD_PORT="+strconv.Itoa(FreePort(t)),
		"FAKE_GPUS="+strconv.Itoa(fakeGPUs), "SLURM_EXTRA_CONF="+extraConf)
	t.Cleanup(func() {
		stop := exec.Command(filepath.Join(scripts, "stop.sh"), dir)
		if out, err := stop.CombinedOutput(); err != nil {
			t.Logf("stop.sh: %v: %s", err, out)
		}
	})
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("start.sh: %v\n%s", err, out)
	}
	conf := filepath.Join(dir, "slurm.conf")
	t.Setenv("SLURM_CONF", conf)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return &Slurm{Dir: dir, Conf: conf, Node: host}
}

// lockSlurm holds an exclusive lock on a host-wide file until the test ends.
func lockSlurm(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "gpuwatch-test-slurm.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := lockFile(f, true); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = unlockFile(f)
		f.Close()
	})
}

// Run runs a Slurm client command and returns its trimmed output.
func (c *Slurm) Run(t *testing.T, name string, args ...string) string {
	t.Helper()
	return run(t, name, args...)
}

// Sbatch submits a job and returns its id.
func (c *Slurm) Sbatch(t *testing.T, args ...string) string {
	t.Helper()
	base := []string{"--parsable", "-o", filepath.Join(c.Dir, "job-%j.out")}
	return c.Run(t, "sbatch", append(base, args...)...)
}

// WaitJob polls until the job's state and reason are as wanted.
func (c *Slurm) WaitJob(t *testing.T, id, state, reason string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		last = c.Run(t, "squeue", "-h", "--states=all", "-j", id, "-o", "%T|%r")
		if last == state+"|"+reason {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("job %s: state|reason %q, want %s|%s", id, last, state, reason)
}
