//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestTextfileInterval runs `gpuwatch textfile --interval` against the
// simulator in real time: the file is rewritten with fresh readings, never
// left half-written or beside a temporary file, and SIGTERM ends the loop
// cleanly.
func TestTextfileInterval(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "gpu.prom")
	p := testenv.StartProcess(t, nil, gpuwatchBin, "textfile", "--backend=sim", "--sim.profile=h100", "--output="+out, "--interval=1s", "--log.level=warn")

	energy := func() float64 {
		data, err := os.ReadFile(out)
		if err != nil {
			return -1
		}
		v, ok := testenv.Sample(testenv.ParseMetrics(t, string(data)), "gpu_energy_joules_total", map[string]string{"gpu": "0"})
		if !ok {
			t.Fatalf("a complete write lacks gpu_energy_joules_total:\n%s", data)
		}
		return v
	}
	var first float64
	testenv.WaitFor(t, 10*time.Second, "the first write", func() bool { first = energy(); return first > 0 })
	testenv.WaitFor(t, 10*time.Second, "a rewrite with a grown energy counter", func() bool { return energy() > first })

	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "gpu.prom" && !strings.HasPrefix(e.Name(), ".gpu.prom.tmp-") {
			t.Errorf("unexpected file %s", e.Name())
		}
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("textfile loop did not stop on SIGTERM")
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM\n%s", code, p.Output.String())
	}
	entries, _ = os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("after stopping, the directory holds %d entries, want only gpu.prom", len(entries))
	}
}

// TestReadiness: /readyz answers 200 once a collection succeeded, and
// /healthz from the start.
func TestReadiness(t *testing.T) {
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile=h100")
	testenv.WaitFor(t, 10*time.Second, "/readyz to answer 200", func() bool {
		_, err := httpGetNoFail(base + "/readyz")
		return err == nil
	})
	if body := httpGet(t, base+"/"); !strings.Contains(body, "/metrics") {
		t.Errorf("landing page does not link the metrics:\n%s", body)
	}
}
