//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/jobs"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestSlurmEpilogsStoreTheSummary: a real single-node Slurm runs the
// shipped node epilog and EpilogSlurmctld (deploy/slurm) around a GPU job
// that gpuwatch watches through its real Slurm attribution. After the job,
// the node's journal has its record, and `scontrol show job` shows the
// summary in the AdminComment after what "jobstats" wrote there.
func TestSlurmEpilogsStoreTheSummary(t *testing.T) {
	dir := shortDir(t)
	acctDir, marks := filepath.Join(dir, "acct"), filepath.Join(dir, "marks")
	port := testenv.FreePort(t)
	repo := testenv.RepoRoot()
	// Slurm gives epilogs no environment of ours: wrappers set it, from a
	// file written once the cluster (and its SLURM_CONF) exists.
	env := filepath.Join(dir, "env")
	epilog := filepath.Join(dir, "epilog.sh")
	writeFile(t, epilog, fmt.Sprintf("#!/bin/sh\nexport GPUWATCH_ACCOUNTING_DIR=%s GPUWATCH_EPILOG_DIR=%s GPUWATCH_EPILOG_WAIT=20\nexec %s\n",
		acctDir, marks, filepath.Join(repo, "deploy/slurm/gpuwatch-epilog.sh")))
	ctld := filepath.Join(dir, "epilog-slurmctld.sh")
	writeFile(t, ctld, fmt.Sprintf("#!/bin/sh\n. %s\nexport GPUWATCH=%s GPUWATCH_NODE_URL='http://{node}:%d' GPUWATCH_WAIT=60s SLURM_CONF\nexec %s 2>>%s\n",
		env, gpuwatchBin, port, filepath.Join(repo, "deploy/slurm/gpuwatch-epilog-slurmctld.sh"), filepath.Join(dir, "ctld.err")))
	for _, f := range []string{epilog, ctld} {
		if err := os.Chmod(f, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cluster := testenv.StartSlurmWith(t, 2, "Epilog="+epilog+"\nEpilogSlurmctld="+ctld)
	writeFile(t, env, "SLURM_CONF="+cluster.Conf+"\n")
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{filepath.Join(cluster.Dir, "log", "slurmctld.log"), filepath.Join(cluster.Dir, "log", "slurmd.log"), filepath.Join(dir, "ctld.err")} {
				data, _ := os.ReadFile(f)
				t.Logf("%s:\n%s", f, data[max(0, len(data)-3000):])
			}
		}
	})

	simConfig := filepath.Join(dir, "sim.yaml")
	writeFile(t, simConfig, "profile: h100\nprocesses: []\n")
	gw := testenv.StartProcess(t, nil, gpuwatchBin, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--backend=sim", "--sim.config="+simConfig,
		"--slurm.jobs=true", "--slurm.node-name="+cluster.Node, "--slurm.poll-interval=1s",
		"--accounting.dir="+acctDir, "--accounting.epilog-dir="+marks, "--accounting.interval=1s")
	testenv.WaitHealthy(t, gw, fmt.Sprintf("http://127.0.0.1:%d", port))

	id := cluster.Sbatch(t, "--gres=gpu:1", "--wrap", "sleep 15")
	testenv.WaitFor(t, 60*time.Second, "gpuwatch to list job "+id+" as running", func() bool {
		var doc jobs.JobDoc
		return getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/api/v1/jobs/%s", port, id), &doc) && len(doc.Records) == 1 && doc.Records[0].Running
	})
	// What jobstats would have written.
	cluster.Run(t, "scontrol", "update", "JobId="+id, "AdminComment=JS1:H4sIAbc=")
	// While the job runs, the controller takes an AdminComment (this
	// cluster has no slurmdbd, so sacctmgr cannot: scontrol is the way).
	out, err := exec.Command(gpuwatchBin, "job", id, fmt.Sprintf("--job.node-url=http://{node}:%d", port), "--job.nodes="+cluster.Node, "--job.admin-comment").CombinedOutput()
	if err != nil {
		t.Fatalf("gpuwatch job --job.admin-comment: %v\n%s", err, out)
	}
	comment := jobs.AdminCommentOf(cluster.Run(t, "scontrol", "show", "job", "-o", id))
	if !strings.HasPrefix(comment, "JS1:H4sIAbc= gpuwatch1:gpus=1;alloc_s=") || !strings.Contains(comment, ";idle=100%;") ||
		!strings.Contains(comment, "per_gpu="+strings.ToLower(cluster.Node)+"/0") || comment != strings.TrimSpace(string(out)) {
		t.Errorf("AdminComment %q (printed %q): want jobstats' part kept, then one idle GPU on %s", comment, out, cluster.Node)
	}

	// At the job's end the node epilog marks it ended and waits for the
	// record; the EpilogSlurmctld gets the summary from the node and
	// would store it, but Slurm 22.05's controller refuses an ended job,
	// and sacctmgr (which would need slurmdbd anyway) would lowercase
	// jobstats' text: nothing is stored, and the error says why.
	testenv.WaitFor(t, 120*time.Second, "the EpilogSlurmctld to run for job "+id, func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "ctld.err"))
		return strings.Contains(string(data), "storing the AdminComment: scontrol:")
	})
	if data, _ := os.ReadFile(filepath.Join(dir, "ctld.err")); !strings.Contains(string(data), "sacctmgr: not tried: it lowercases") {
		t.Errorf("the EpilogSlurmctld's error does not say why sacctmgr was not tried:\n%s", data)
	}
	if comment := jobs.AdminCommentOf(cluster.Run(t, "scontrol", "show", "job", "-o", id)); !strings.HasPrefix(comment, "JS1:H4sIAbc= gpuwatch1:") {
		t.Errorf("after the job, AdminComment %q: want jobstats' text and the summary stored while it ran, untouched", comment)
	}
	recs, _, err := jobs.ReadJournal(acctDir)
	if err != nil || len(recs) != 1 || recs[0].ID != id || recs[0].Slurm == nil || recs[0].Slurm.User != "root" || len(recs[0].GPUs) != 1 {
		t.Fatalf("journal: %+v %v", recs, err)
	}
	if a := recs[0].GPUs[0].AllocatedSeconds; a < 5 || a > 20 {
		t.Errorf("allocated %.0f s, want the job's 8 s ± a few", a)
	}
	// Slurm runs the EpilogSlurmctld beside the node epilog, which may
	// still be waiting (GPUWATCH_EPILOG_WAIT, 20 s) for gpuwatch's next
	// tick to answer: a mark that came after the record, when gpuwatch saw
	// the job leave Slurm's list first. Answered, it removes its mark.
	testenv.WaitFor(t, 20*time.Second, "the node epilog's end mark of job "+id+" to be removed", func() bool {
		_, err := os.Stat(filepath.Join(marks, id))
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(filepath.Join(acctDir, jobs.DoneDir, id)); err != nil {
		t.Errorf("gpuwatch did not answer the epilog of job %s: %v", id, err)
	}
}

// shortDir is a temporary directory with a short path (Slurm's and
// munge's sockets live under the cluster's).
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "gwj")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
