//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// runScript is the README's first command.
var runScript = filepath.Join("..", "..", "scripts", "run.sh")

// runScriptEnv is this process's environment with GPUWATCH_BIN set (so that
// run.sh runs the binary under test instead of building one) and
// LD_LIBRARY_PATH set to libDir.
func runScriptEnv(libDir string, extra ...string) []string {
	env := []string{"GPUWATCH_BIN=" + gpuwatchBin, "LD_LIBRARY_PATH=" + libDir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LD_LIBRARY_PATH=") && !strings.HasPrefix(kv, "GPUWATCH_BIN=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// ./scripts/run.sh shows the product working on any machine: the demo where
// the driver library is missing (said so on the console and the page), the
// driver's GPUs where it is there, and the driver's own error, never the
// demo, where it is there but failing.
func TestRunScript(t *testing.T) {
	t.Run("no driver library: the demo, said so", func(t *testing.T) {
		if err := exec.Command(gpuwatchBin, "ps", "--no-attribution").Run(); err == nil {
			t.Skip("this host has a working NVIDIA driver (a GPU node): run.sh serves it, the fallback is not reachable")
		}
		addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		p := testenv.StartProcess(t, runScriptEnv(t.TempDir()), runScript, "--web.listen-address="+addr)
		base := "http://" + addr
		testenv.WaitHealthy(t, p, base)
		if out := p.Output.String(); !strings.Contains(out, "gpuwatch DEMO: no NVIDIA driver") || !strings.Contains(out, "Open the live page: "+base+"/\n") {
			t.Errorf("no demo banner with the page's address on the console:\n%s", out)
		}
		if snap := httpGet(t, base+"/api/v1/snapshot"); !strings.Contains(snap, `"simulated":true`) {
			t.Errorf("the demo's snapshot does not say simulated:\n%.300s", snap)
		}
		if page := httpGet(t, base+"/"); !strings.Contains(page, "Simulated GPUs") || !strings.Contains(page, "On a GPU node") {
			t.Errorf("the page does not say it is the demo or how to run on a GPU node:\n%.2000s", page)
		}
		// The demo keeps job records in a temporary directory, says how to
		// read them, and removes the directory when it stops.
		printed := regexp.MustCompile(`(\S+) (job 4211 --accounting.dir=(\S+))`).FindStringSubmatch(p.Output.String())
		if printed == nil {
			t.Fatalf("the banner prints no `gpuwatch job 4211` command:\n%s", p.Output.String())
		}
		// The printed command works as printed: the running job, at once
		// (a job is checkpointed when it starts), marked running.
		var shown string
		testenv.WaitFor(t, 30*time.Second, "the printed job command to succeed", func() bool {
			b, err := exec.Command(printed[1], strings.Fields(printed[2])...).CombinedOutput()
			shown = string(b)
			return err == nil
		})
		if !strings.Contains(shown, "Job 4211") || !strings.Contains(shown, "alice") || !strings.Contains(strings.ToLower(shown), "running") {
			t.Errorf("%s %s does not show the demo's running job 4211:\n%s", printed[1], printed[2], shown)
		}
		acct := printed[3]
		if fi, err := os.Stat(acct); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("the demo's accounting directory %s: %v %v, want a directory only its owner reads", acct, fi, err)
		}
		if entries, _ := os.ReadDir(acct); len(entries) == 0 {
			t.Errorf("the demo keeps no records in %s", acct)
		}
		if err := p.Cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 30*time.Second, "run.sh to stop on SIGINT", p.Exited)
		if _, err := os.Stat(acct); !os.IsNotExist(err) {
			t.Errorf("the demo's accounting directory %s is still there after it stopped (%v)", acct, err)
		}
	})

	t.Run("a driver that fails: its error, not the demo", func(t *testing.T) {
		// The fake library fails nvmlInit (NVML_ERROR_UNKNOWN) when its
		// config cannot be loaded: a driver that is there but broken.
		lib := filepath.Join(fakeNVMLDir(t), "R580")
		env := runScriptEnv(lib, "GPUWATCH_SIM_CONFIG="+filepath.Join(t.TempDir(), "missing.yaml"))
		cmd := exec.Command(runScript, "--web.listen-address=127.0.0.1:0")
		cmd.Env = env
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("run.sh with a failing driver did not exit")
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || ee.ExitCode() == 69 {
			t.Errorf("exit %v, want the driver error's status (1)\n%s", err, out)
		}
		if strings.Contains(string(out), "DEMO") || strings.Contains(string(out), "backend=sim ") {
			t.Errorf("a failing driver was hidden behind the demo:\n%s", out)
		}
		if !strings.Contains(string(out), "gpuwatch: ") {
			t.Errorf("no error from gpuwatch:\n%s", out)
		}
	})

	t.Run("a driver: its GPUs, no demo", func(t *testing.T) {
		lib := filepath.Join(fakeNVMLDir(t), "R580")
		addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		p := testenv.StartProcess(t, runScriptEnv(lib, "GPUWATCH_SIM_PROFILE=h100"), runScript, "--web.listen-address="+addr)
		base := "http://" + addr
		testenv.WaitHealthy(t, p, base)
		if snap := httpGet(t, base+"/api/v1/snapshot"); !strings.Contains(snap, `"simulated":false`) {
			t.Errorf("run.sh with a driver did not serve it through NVML:\n%.300s", snap)
		}
		if out := p.Output.String(); strings.Contains(out, "DEMO") {
			t.Errorf("demo banner with a driver present:\n%s", out)
		}
	})
}
