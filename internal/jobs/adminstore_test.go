package jobs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

// fakeSlurm writes scontrol, sacct and sacctmgr scripts into a directory:
// scontrol shows the job with the controller's comment and takes an update
// only when running is set; sacct prints the database's comment; sacctmgr
// stores what it is given lowercased, as Slurm 22.05's does. Every call is
// logged in calls.
func fakeSlurm(t *testing.T, controller, database string, running bool) (dir string) {
	t.Helper()
	dir = t.TempDir()
	update := `echo "Job has already finished for job 7" >&2; exit 1`
	if running {
		update = `printf '%s\n' "${3#AdminComment=}" >"$D/controller-set"`
	}
	scripts := map[string]string{
		"scontrol": `case "$1" in
show) echo "JobId=7 JobName=train AdminComment=$(cat "$D/controller") StdErr=/tmp/o" ;;
update) ` + update + ` ;;
esac`,
		"sacct":    `cat "$D/database"`,
		"sacctmgr": `for a in "$@"; do case "$a" in AdminComment=*) printf '%s\n' "${a#AdminComment=}" | tr 'A-Z' 'a-z' >"$D/database-set" ;; esac; done`,
	}
	for name, body := range scripts {
		script := "#!/bin/sh\nD=" + dir + "\necho " + name + " \"$@\" >>\"$D/calls\"\n" + body + "\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{"controller": controller, "database": database} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readTrimmed(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// The AdminComment goes to the controller while the job runs (case kept),
// to the database once it ended, and never through sacctmgr when that
// would lowercase another tool's text.
func TestStoreAdminComment(t *testing.T) {
	summary := Summary{JobID: "7", Total: Total{GPUs: 1, AllocatedSeconds: 60}}
	ours := AdminComment(summary)
	for _, c := range []struct {
		name                 string
		controller, database string
		running              bool
		wantController       string // what scontrol update was given
		wantDatabase         string // what sacctmgr stored
		wantErr              string
	}{
		{name: "running job: the controller, case kept", controller: "JS1:H4sIAbc=", running: true,
			wantController: "JS1:H4sIAbc= " + ours},
		{name: "ended job: the database, after its lowercased text", controller: "JS1:H4sIAbc=", database: "js1:h4siabc= site:checked",
			wantDatabase: "js1:h4siabc= site:checked " + ours},
		{name: "ended job, nothing else there", wantDatabase: ours},
		{name: "ended job whose text has capitals: not damaged", controller: "JS1:H4sIAbc=",
			wantErr: "it lowercases what it sets"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := fakeSlurm(t, c.controller, c.database, c.running)
			store := AdminCommentStore{Run: slurm.ExecRunner{Timeout: 10 * time.Second}, Scontrol: filepath.Join(dir, "scontrol")}
			stored, err := store.Store(context.Background(), "7", summary)
			switch {
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("err = %v, want one saying %q", err, c.wantErr)
			case c.wantErr == "" && err != nil:
				t.Fatal(err)
			}
			if got := readTrimmed(t, filepath.Join(dir, "controller-set")); got != c.wantController {
				t.Errorf("scontrol update got %q, want %q", got, c.wantController)
			}
			if got := readTrimmed(t, filepath.Join(dir, "database-set")); got != c.wantDatabase {
				t.Errorf("sacctmgr stored %q, want %q\ncalls:\n%s", got, c.wantDatabase, readTrimmed(t, filepath.Join(dir, "calls")))
			}
			if want := c.wantController + c.wantDatabase; stored != want {
				t.Errorf("returned %q, want %q", stored, want)
			}
		})
	}
}
