//go:build linux

package faults

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

func TestSignalHangupServe(t *testing.T) {
	t.Parallel()
	record(t, "signals", "SIGHUP to serve (used to kill it, exit 129): logged and ignored, still serving")
	h := start(t, "--backend=sim", "--sim.profile=dgx-h100")
	h.baseline()
	for range 3 {
		_ = h.Cmd.Process.Signal(syscall.SIGHUP)
	}
	testenv.WaitFor(t, 10*time.Second, "the SIGHUP to be logged", func() bool { return strings.Contains(h.Output.String(), "SIGHUP") })
	h.scrape()
	h.noLeak()
}

// The scrape in flight when SIGTERM arrives waits on a hung GPU; the
// shutdown drains for one collection timeout and exits 0 (it used to exit
// 1 with "context deadline exceeded").
func TestSignalTermDuringSlowScrape(t *testing.T) {
	t.Parallel()
	record(t, "signals", "SIGTERM while a scrape waits on a hung GPU (timeout 8s, longer than the old 5s drain): exit 0 within the drain")
	h := start(t, "--backend=sim", "--collection.timeout=8s",
		"--sim.config="+simConfig(t, "profile: dgx-h100\nfaults:\n  - {gpu: 0, hang_after: 2s}\n"))
	h.startFailed = true                // stopped here, not by the harness
	time.Sleep(2500 * time.Millisecond) // the hang has begun
	go func() { _, _, _ = h.get("/metrics", 30*time.Second) }()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	_ = h.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.Done:
	case <-time.After(8*time.Second + 2*margin):
		_ = h.Cmd.Process.Kill()
		<-h.Done
		t.Fatalf("no exit %v after SIGTERM", time.Since(start))
	}
	if code := h.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0\n%s", code, h.tail())
	}
}

func TestSignalHangupTextfile(t *testing.T) {
	t.Parallel()
	record(t, "signals", "SIGHUP to textfile --interval=1s: logged and ignored; SIGTERM then exits 0 leaving a complete file")
	out := filepath.Join(t.TempDir(), "gpu.prom")
	cmd := exec.Command(gpuwatchBin, "textfile", "--backend=sim", "--sim.profile=h100", "--interval=1s", "--output="+out)
	buf := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	testenv.WaitFor(t, 20*time.Second, "the first write", func() bool { _, err := os.Stat(out); return err == nil })
	_ = cmd.Process.Signal(syscall.SIGHUP)
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	testenv.WaitFor(t, 10*time.Second, "SIGHUP to be logged (or to end textfile)", func() bool {
		return strings.Contains(buf.String(), "SIGHUP") || exited()
	})
	if exited() {
		t.Fatalf("textfile died of SIGHUP: %v\n%s", cmd.ProcessState, buf.String())
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10s after SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM\n%s", code, buf.String())
	}
}
