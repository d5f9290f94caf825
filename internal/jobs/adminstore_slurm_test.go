package jobs

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/slurm"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// On real Slurm, a job named "train AdminComment=js1:forged" (Slurm takes
// the name as it is) cannot pass its name for the AdminComment: the
// summary is stored after the job's real AdminComment, not after the
// forged text.
func TestAdminCommentNotFooledByTheJobNameOnRealSlurm(t *testing.T) {
	c := testenv.StartSlurm(t, 1)
	const name = "train AdminComment=js1:forged"
	id := c.Sbatch(t, "-J", name, "--wrap", "sleep 300")
	c.WaitJob(t, id, "RUNNING", "None")
	t.Cleanup(func() { _ = exec.Command("scancel", id).Run() })
	if got := c.Run(t, "squeue", "-h", "-j", id, "-o", "%j"); got != name {
		t.Fatalf("Slurm names the job %q, want %q", got, name)
	}
	c.Run(t, "scontrol", "update", "JobId="+id, "AdminComment=JS1:real")
	line := c.Run(t, "scontrol", "show", "job", "-o", id)
	if strings.Count(line, " AdminComment=") < 2 {
		t.Fatalf("scontrol show job -o: the name's AdminComment= is not in the line, so the test proves nothing:\n%s", line)
	}

	store := AdminCommentStore{Run: slurm.ExecRunner{Timeout: 10 * time.Second}, Scontrol: "scontrol"}
	got, err := store.controllerComment(context.Background(), id)
	if err != nil || got != "JS1:real" {
		t.Fatalf("the controller's AdminComment: %q, %v; want JS1:real", got, err)
	}
	s := Summary{JobID: id, Total: Total{GPUs: 1, AllocatedSeconds: 60}}
	stored, err := store.Store(context.Background(), id, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := "JS1:real " + AdminComment(s); stored != want {
		t.Errorf("stored %q, want %q", stored, want)
	}
	out, err := exec.Command("squeue", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	inSlurm, ok, err := AdminCommentFromSqueueJSON(out, id)
	if err != nil || !ok || inSlurm != stored || strings.Contains(inSlurm, "forged") {
		t.Errorf("Slurm holds %q (%v, %v), want %q", inSlurm, ok, err, stored)
	}
}

// Where squeue has no --json, a line that shows "AdminComment=" twice
// is refused, not guessed at.
func TestAdminCommentAmbiguousLineRefused(t *testing.T) {
	dir := fakeSlurm(t, "JS1:real", "", true)
	store := AdminCommentStore{Run: slurm.ExecRunner{Timeout: 10 * time.Second}, Scontrol: dir + "/scontrol"}
	if got, err := store.controllerComment(context.Background(), "7"); err != nil || got != "JS1:real" {
		t.Fatalf("one AdminComment: %q, %v", got, err)
	}
	writeScript(t, dir+"/scontrol", `echo "JobId=7 JobName=train AdminComment=js1:forged UserId=root AdminComment=JS1:real StdErr=/tmp/o"`)
	if _, err := store.Store(context.Background(), "7", Summary{JobID: "7"}); err == nil || !strings.Contains(err.Error(), "2 times") {
		t.Errorf("an ambiguous line: %v, want a refusal", err)
	}
}

// squeue --json's admin_comment is the job's, whatever its name holds.
func TestAdminCommentFromSqueueJSON(t *testing.T) {
	doc, _ := json.Marshal(map[string]any{"jobs": []map[string]any{
		{"job_id": 6, "name": "x", "admin_comment": "other"},
		{"job_id": 7, "name": "train AdminComment=js1:forged", "admin_comment": "JS1:real"},
	}})
	if c, ok, err := AdminCommentFromSqueueJSON(doc, "7"); err != nil || !ok || c != "JS1:real" {
		t.Errorf("job 7: %q %v %v", c, ok, err)
	}
	if _, ok, err := AdminCommentFromSqueueJSON(doc, "8"); err != nil || ok {
		t.Errorf("job 8 (not listed): %v %v", ok, err)
	}
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}
