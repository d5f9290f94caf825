//go:build cgo

package jobs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The helper process: a recorder on the rig's scenario, in the directory
// GPUWATCH_CRASH_DIR, from the elapsed time GPUWATCH_CRASH_FROM to 90 s.
// With GPUWATCH_CRASH_AT it kills itself with SIGKILL at that write point,
// after writing the sim's elapsed time to DIR/crashed-at.
func TestCrashHelperProcess(t *testing.T) {
	dir := os.Getenv("GPUWATCH_CRASH_DIR")
	if dir == "" {
		t.Skip("the helper process of TestSIGKILLAtEachWritePoint")
	}
	from, err := time.ParseDuration(os.Getenv("GPUWATCH_CRASH_FROM"))
	if err != nil {
		t.Fatal(err)
	}
	r := jobRig(t, Options{Dir: dir, CheckpointInterval: 4 * time.Second})
	if at := os.Getenv("GPUWATCH_CRASH_AT"); at != "" {
		crashPoint = func(point string) {
			if point == at {
				_ = os.WriteFile(filepath.Join(dir, "crashed-at"), []byte(r.sim.Elapsed().String()), 0o600)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // SIGKILL is on its way
			}
		}
	}
	r.sim.SetElapsed(from)
	r.run(step, 90*time.Second)
}

// A gpuwatch killed with SIGKILL at any write point (jobs ended and not
// written yet; a record written and the checkpoint not yet; a checkpoint
// written) and restarted leaves each record in the journal exactly once,
// whole: the restarted writer does not append a record the journal holds.
func TestSIGKILLAtEachWritePoint(t *testing.T) {
	for _, point := range []string{"ended", "journaled", "checkpointed"} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			helper := func(from, at string) error {
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), "GPUWATCH_CRASH_DIR="+dir, "GPUWATCH_CRASH_FROM="+from, "GPUWATCH_CRASH_AT="+at)
				out, err := cmd.CombinedOutput()
				if err != nil && at == "" {
					return fmt.Errorf("%w\n%s", err, out)
				}
				return err
			}
			err := helper("0s", point)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the helper was not killed at %q: %v", point, err)
			}
			at, err := os.ReadFile(filepath.Join(dir, "crashed-at"))
			if err != nil {
				t.Fatal(err)
			}
			crashedAt, err := time.ParseDuration(string(at))
			if err != nil {
				t.Fatal(err)
			}
			if err := helper((crashedAt + step).String(), ""); err != nil {
				t.Fatalf("restarted after the crash at %s: %v", crashedAt, err)
			}
			data, err := os.ReadFile(filepath.Join(dir, JournalName))
			if err != nil {
				t.Fatal(err)
			}
			read, err := ReadJournalReport(dir)
			if err != nil {
				t.Fatal(err)
			}
			lines := bytes.Count(data, []byte("\n"))
			if lines != 2 || read.Skipped != 0 || read.Duplicates != 0 || len(read.Records) != 2 {
				t.Fatalf("killed at %q (%s): %d lines, %d records, %d skipped, %d duplicates; want the pod's and job 1234's once each\n%s",
					point, crashedAt, lines, len(read.Records), read.Skipped, read.Duplicates, data)
			}
			if read.Records[0].Kind != KindPod || read.Records[1].ID != "1234" {
				t.Errorf("records %s %s, want the pod's then job 1234's", read.Records[0].ID, read.Records[1].ID)
			}
		})
	}
}
