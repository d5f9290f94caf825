package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/jobs"
)

// The journal check names what keeps records from being written and
// what to do: a directory others can write, an obstacle to rotation,
// records waiting in the checkpoint.
func TestJournalCheckSaysWhatIsWrong(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "acct")
	if r := checkJournal(Env{AccountingDir: dir}); len(r) != 1 || r[0].Status != OK || !strings.Contains(r[0].Found, "does not exist yet") {
		t.Errorf("a missing directory: %+v", r)
	}
	if err := os.MkdirAll(filepath.Join(dir, jobs.JournalName+".1"), 0o750); err != nil {
		t.Fatal(err)
	}
	ckpt := `{"version":1,"node":"n1","time":"2026-01-01T00:00:00Z","jobs":[],"pending":[{"id":"7","kind":"slurm","start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:01:00Z","gpus":[]}]}`
	if err := os.WriteFile(filepath.Join(dir, jobs.CheckpointName), []byte(ckpt), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o757); err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, r := range checkJournal(Env{AccountingDir: dir}) {
		if r.Status != Fail || r.Fix == "" || !r.Needed {
			t.Errorf("not a failure with a fix: %+v", r)
		}
		found = append(found, r.Found)
	}
	all := strings.Join(found, "\n")
	for _, want := range []string{"writable by every user", jobs.JournalName + ".1, which is not a regular file", "1 ended jobs' records wait in the checkpoint"} {
		if !strings.Contains(all, want) {
			t.Errorf("the check does not say %q:\n%s", want, all)
		}
	}
	if r := checkJournal(Env{}); len(r) != 1 || r[0].Status != Skip {
		t.Errorf("records off: %+v", r)
	}
}
