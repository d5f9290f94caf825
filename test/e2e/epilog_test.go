//go:build linux

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/jobs"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// nobody stands for gpuwatch's (unprivileged) user, or any other.
const nobody = 65534

// runEpilog runs the shipped node epilog as root, as slurmd does, and
// fails the test if it does not end within a minute (an epilog that hangs
// drains the node) or exits non-zero. It returns its standard error.
func runEpilog(t *testing.T, job, acctDir, marks, wait string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", filepath.Join(testenv.RepoRoot(), "deploy/slurm/gpuwatch-epilog.sh"))
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_JOB_ID=" + job, "GPUWATCH_ACCOUNTING_DIR=" + acctDir,
		"GPUWATCH_EPILOG_DIR=" + marks, "GPUWATCH_EPILOG_WAIT=" + wait}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the epilog for job %s: %v (a hang drains the node)\n%s", job, err, stderr.String())
	}
	return stderr.String()
}

// TestNodeEpilogNeverWritesWhereAnotherUserCan: the node epilog, run as
// root, is given an accounting directory whose owner (gpuwatch's user, or
// anyone) planted a link to a root-owned file at the mark's old place, a
// FIFO there, and the mark directory replaced by a link to a root-owned
// directory; then end-mark directories that user controls. Root writes
// through none of them, and the epilog never hangs.
func TestNodeEpilogNeverWritesWhereAnotherUserCan(t *testing.T) {
	testenv.RequireTool(t, "setpriv", "util-linux")
	if os.Geteuid() != 0 {
		testenv.Missing(t, "the epilog runs as root; so must this test")
	}
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(base, "victim")
	const content = "root's file"
	writeFile(t, victim, content)
	rootDir := filepath.Join(base, "rootdir")
	if err := os.Mkdir(rootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	marks := filepath.Join(base, "marks")

	// An accounting directory of the other user, with what it planted.
	acct := func(name string, plant ...[]string) string {
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		testenv.AsUser(t, nobody, "mkdir", filepath.Join(dir, jobs.DoneDir))
		for _, p := range plant {
			testenv.AsUser(t, nobody, p[0], p[1:]...)
		}
		return dir
	}
	link := acct("acct-link", []string{"mkdir", filepath.Join(base, "acct-link", "ended")},
		[]string{"ln", "-s", victim, filepath.Join(base, "acct-link", "ended", "901")})
	fifo := acct("acct-fifo", []string{"mkdir", filepath.Join(base, "acct-fifo", "ended")},
		[]string{"mkfifo", filepath.Join(base, "acct-fifo", "ended", "902")})
	dirLink := acct("acct-dirlink", []string{"ln", "-s", rootDir, filepath.Join(base, "acct-dirlink", "ended")})

	runEpilog(t, "901", link, marks, "1")
	runEpilog(t, "902", fifo, marks, "1")
	runEpilog(t, "903", dirLink, marks, "1")
	if data, err := os.ReadFile(victim); err != nil || string(data) != content {
		t.Errorf("root's file behind the planted link: %q, %v", data, err)
	}
	if entries, _ := os.ReadDir(rootDir); len(entries) != 0 {
		t.Errorf("root created %s in its directory through the planted link", entries[0].Name())
	}
	if entries, _ := os.ReadDir(marks); len(entries) != 0 {
		t.Errorf("the epilog left its mark %s", entries[0].Name())
	}

	// End-mark directories root does not control alone: no mark is made.
	hostileMarks := filepath.Join(base, "hostile-marks")
	if err := os.Mkdir(hostileMarks, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(hostileMarks, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	testenv.AsUser(t, nobody, "ln", "-s", victim, filepath.Join(hostileMarks, "904"))
	hostileParent := filepath.Join(base, "hostile-parent")
	if err := os.Mkdir(hostileParent, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(hostileParent, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	testenv.AsUser(t, nobody, "ln", "-s", rootDir, filepath.Join(hostileParent, "marks"))
	writable := filepath.Join(base, "writable-marks")
	if err := os.Mkdir(writable, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(writable, 0o777); err != nil {
		t.Fatal(err)
	}
	for job, dir := range map[string]string{"904": hostileMarks, "905": filepath.Join(hostileParent, "marks"), "906": filepath.Join(hostileParent, "new"), "907": writable} {
		stderr := runEpilog(t, job, link, dir, "1")
		if !strings.Contains(stderr, "must be a directory that root owns") {
			t.Errorf("job %s, marks in %s: the epilog did not refuse: %q", job, dir, stderr)
		}
	}
	if data, err := os.ReadFile(victim); err != nil || string(data) != content {
		t.Errorf("root's file behind the planted link: %q, %v", data, err)
	}
	for _, dir := range []string{rootDir, writable} {
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("root wrote %s in %s", entries[0].Name(), dir)
		}
	}
	if _, err := os.Lstat(filepath.Join(hostileParent, "new")); !os.IsNotExist(err) {
		t.Errorf("root made a directory in another user's: %v", err)
	}
}

// TestNodeEpilogDoesNotWaitForAJobWithoutGPU: gpuwatch answers the mark
// of a job it never saw on a GPU at its next tick, so the epilog, told to
// wait ten minutes, ends at once; its mark is gone.
func TestNodeEpilogDoesNotWaitForAJobWithoutGPU(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "the epilog runs as root; so must this test")
	}
	dir := t.TempDir()
	acct, marks := filepath.Join(dir, "acct"), filepath.Join(dir, "marks")
	cfg := filepath.Join(dir, "sim.yaml")
	writeFile(t, cfg, "profile: h100\nprocesses: []\n")
	startGpuwatch(t, "--backend=sim", "--sim.config="+cfg, "--accounting.dir="+acct, "--accounting.epilog-dir="+marks, "--accounting.interval=1s")
	runEpilog(t, "4242", acct, marks, "600")
	if _, err := os.Stat(filepath.Join(acct, jobs.DoneDir, "4242")); err != nil {
		t.Errorf("gpuwatch's answer: %v", err)
	}
	if _, err := os.Stat(filepath.Join(marks, "4242")); !os.IsNotExist(err) {
		t.Errorf("the mark is still there: %v", err)
	}
}
