//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The README's one command for a local stack without Docker: the demo, a
// Prometheus from PATH with the shipped rules scraping it, the URLs, and a
// report command that works from the first minute. Ctrl-C stops it all.
func TestLocalStack(t *testing.T) {
	testenv.RequireTool(t, "prometheus", "prometheus")
	if signal.Ignored(os.Interrupt) {
		// Inherited (a background job of a non-interactive shell starts
		// with SIGINT ignored), and a shell cannot trap a signal ignored
		// when it started: the Ctrl-C below would never reach stack.sh,
		// and its gpuwatch and Prometheus would outlive the test.
		t.Fatal("SIGINT is ignored in this test process, so stack.sh cannot see Ctrl-C: run go test in the foreground, or reset SIGINT first")
	}
	gport, pport := testenv.FreePort(t), testenv.FreePort(t)
	dir := t.TempDir()
	p := testenv.StartProcess(t, append(runScriptEnv(""),
		fmt.Sprintf("GPUWATCH_PORT=%d", gport), fmt.Sprintf("PROMETHEUS_PORT=%d", pport), "STACK_DIR="+dir),
		filepath.Join("..", "..", "scripts", "stack.sh"))
	var report string
	testenv.WaitFor(t, 90*time.Second, "stack.sh to print its URLs", func() bool {
		if p.Exited() {
			t.Fatalf("stack.sh exited:\n%s", p.Output.String())
		}
		for l := range strings.SplitSeq(p.Output.String(), "\n") {
			if cmd, ok := strings.CutPrefix(l, "Report:"); ok {
				report = strings.TrimSpace(cmd)
			}
		}
		return report != ""
	})
	promURL := fmt.Sprintf("http://127.0.0.1:%d", pport)
	out := p.Output.String()
	for _, want := range []string{fmt.Sprintf("http://127.0.0.1:%d/", gport), promURL + "/", "Ctrl-C stops"} {
		if !strings.Contains(out, want) {
			t.Errorf("stack.sh does not print %s:\n%s", want, out)
		}
	}
	if rules := httpGet(t, promURL+"/api/v1/rules"); !strings.Contains(rules, "GPUAllocatedIdleSlurm") || !strings.Contains(rules, "user:gpu_hours:1h") {
		t.Errorf("Prometheus did not load the shipped alert and recording rules:\n%.500s", rules)
	}

	// The printed command, as a user pastes it, within the first minute.
	args := strings.Fields(report)
	var last string
	testenv.WaitFor(t, 60*time.Second, "the printed report command to succeed", func() bool {
		cmd := exec.Command(args[0], args[1:]...)
		b, err := cmd.CombinedOutput()
		last = string(b)
		return err == nil
	})
	if !strings.Contains(last, "alice") {
		t.Errorf("the report names no demo user:\n%s", last)
	}

	// The printed job command, as a user pastes it: the demo's Slurm job
	// 4211, from the records in the stack's accounting directory.
	var job string
	for l := range strings.SplitSeq(p.Output.String(), "\n") {
		if cmd, ok := strings.CutPrefix(l, "Job:"); ok {
			job = strings.TrimSpace(cmd)
		}
	}
	jobArgs := strings.Fields(job)
	if len(jobArgs) < 3 || jobArgs[1] != "job" || jobArgs[2] != "4211" {
		t.Fatalf("stack.sh prints no job command for the demo's job 4211 (%q):\n%s", job, p.Output.String())
	}
	acct := strings.TrimPrefix(jobArgs[len(jobArgs)-1], "--accounting.dir=")
	testenv.WaitFor(t, 90*time.Second, "the printed job command to succeed", func() bool {
		b, err := exec.Command(jobArgs[0], jobArgs[1:]...).CombinedOutput()
		last = string(b)
		return err == nil
	})
	if !strings.Contains(last, "Job 4211") || !strings.Contains(last, "alice") {
		t.Errorf("gpuwatch job 4211 does not show the demo's job:\n%s", last)
	}

	// Ctrl-C (SIGINT to the script) stops gpuwatch and Prometheus too.
	if err := p.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "stack.sh to exit on SIGINT", p.Exited)
	testenv.WaitFor(t, 30*time.Second, "gpuwatch and Prometheus to stop", func() bool {
		_, gerr := httpGetNoFail(fmt.Sprintf("http://127.0.0.1:%d/healthz", gport))
		_, perr := httpGetNoFail(promURL + "/-/ready")
		return gerr != nil && perr != nil
	})
	if _, err := os.Stat(acct); !os.IsNotExist(err) {
		t.Errorf("the stack's accounting directory %s is still there after it stopped (%v)", acct, err)
	}
}
