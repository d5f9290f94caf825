package testenv

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// StopGrace is how long a child gets to exit after the interrupt that
// ends it at test end before it is killed: gpuwatch drains its HTTP server
// and flushes its journal in that time.
const StopGrace = 5 * time.Second

// Process is a child process a test started (gpuwatch, Prometheus, ...)
// and its combined output.
type Process struct {
	Cmd    *exec.Cmd
	Output *SyncBuffer
	Done   chan struct{} // closed once the process has exited and been reaped
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}

// StartProcess starts bin with args in the environment env (nil: this
// process's). When the test ends a process still running is interrupted,
// and killed after StopGrace; its output is logged when the test failed. A
// test that asserts how the process exits stops it itself in a cleanup of
// its own, which runs first.
func StartProcess(t testing.TB, env []string, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{Cmd: exec.Command(bin, args...), Output: &SyncBuffer{}, Done: make(chan struct{})}
	p.Cmd.Env = env
	p.Cmd.Stdout, p.Cmd.Stderr = p.Output, p.Output
	// A child the process left behind (a script's gpuwatch) keeps the
	// output pipe open after the kill; without a bound, Wait, and with it
	// the test, would hang until go test's own timeout.
	p.Cmd.WaitDelay = StopGrace
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() { _ = p.Cmd.Wait(); close(p.Done) }()
	t.Cleanup(func() {
		if !p.Exited() {
			_ = p.Cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.Done:
			case <-time.After(StopGrace):
				_ = p.Cmd.Process.Kill()
				<-p.Done
			}
		}
		if t.Failed() {
			t.Logf("output of %s %s:\n%s", filepath.Base(bin), strings.Join(args, " "), p.Output.String())
		}
	})
	return p
}

// HealthzWait is how long a starting gpuwatch may take to answer /healthz:
// the simulator's largest profile on a loaded 2-core machine.
const HealthzWait = 20 * time.Second

// WaitHealthy waits until the gpuwatch p answers base+"/healthz" with 200;
// it fails the test at once, with p's output, when p exits first.
func WaitHealthy(t testing.TB, p *Process, base string) {
	t.Helper()
	WaitFor(t, HealthzWait, "gpuwatch to answer /healthz", func() bool {
		if p.Exited() {
			t.Fatalf("gpuwatch exited at start: %v\n%s", p.Cmd.ProcessState, p.Output.String())
		}
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// StartGpuwatch runs bin (a gpuwatch binary) with args in env (nil: this
// process's) listening on a free loopback port, and waits until it answers
// /healthz. It returns the base URL ("http://127.0.0.1:PORT").
func StartGpuwatch(t testing.TB, env []string, bin string, args ...string) (string, *Process) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	p := StartProcess(t, env, bin, append([]string{"--web.listen-address=" + addr}, args...)...)
	base := "http://" + addr
	WaitHealthy(t, p, base)
	return base, p
}
