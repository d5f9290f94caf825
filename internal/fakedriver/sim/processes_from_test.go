//go:build cgo

package sim

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// writeAtomically replaces path as a processes_from writer should.
func writeAtomically(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// computePIDs lists the PIDs GetComputeRunningProcesses reports on GPU i.
func computePIDs(t *testing.T, s *Sim, i int) string {
	t.Helper()
	procs, r := handle(t, s, i).GetComputeRunningProcesses()
	if r != nvml.SUCCESS {
		t.Fatalf("GetComputeRunningProcesses(%d): %v", i, r)
	}
	var pids []string
	for _, p := range procs {
		pids = append(pids, strconv.Itoa(int(p.Pid)))
	}
	return strings.Join(pids, ",")
}

// startSleeper runs a real process for the simulator to report.
func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestProcessesFromFollowsTheFileAndLiveProcesses(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "sim.yaml")
	if err := os.WriteFile(cfgPath, []byte("profile: dgx-h100\nprocesses:\n  - {gpu: 0, pid: 4242}\nprocesses_from: live.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "live.yaml"); cfg.ProcessesFrom != want {
		t.Fatalf("processes_from = %q, want %q (relative to the config file)", cfg.ProcessesFrom, want)
	}
	s := newSim(t, cfg)
	// No file yet: only the configured process.
	if got := computePIDs(t, s, 0); got != "4242" {
		t.Fatalf("without the file, GPU 0 lists %q, want 4242", got)
	}
	a, b := startSleeper(t), startSleeper(t)
	pa, pb := strconv.Itoa(a.Process.Pid), strconv.Itoa(b.Process.Pid)
	live := filepath.Join(dir, "live.yaml")
	writeAtomically(t, live, "processes:\n  - {gpu: 0, pid: "+pa+", used_memory_bytes: 1073741824, sm_utilization: 0.5}\n  - {gpu: 1, pid: "+pb+"}\n")
	if got := computePIDs(t, s, 0); got != "4242,"+pa {
		t.Errorf("GPU 0 lists %q, want 4242,%s", got, pa)
	}
	if got := computePIDs(t, s, 1); got != pb {
		t.Errorf("GPU 1 lists %q, want %s", got, pb)
	}
	mem, r := handle(t, s, 0).GetMemoryInfo_v2()
	if r != nvml.SUCCESS || mem.Used != 1<<30 {
		t.Errorf("GPU 0 memory used %d (%v), want the live process's 1 GiB", mem.Used, r)
	}

	// A process that exits is no longer reported, as a driver forgets it.
	_ = b.Process.Kill()
	_ = b.Wait()
	if got := computePIDs(t, s, 1); got != "" {
		t.Errorf("after its process exited, GPU 1 lists %q", got)
	}

	// A bad file keeps the last good content and says why.
	writeAtomically(t, live, "processes:\n  - {gpu: 9, pid: "+pa+"}\n")
	if got := computePIDs(t, s, 0); got != "4242,"+pa {
		t.Errorf("after a bad file, GPU 0 lists %q, want the last good 4242,%s", got, pa)
	}
	if err := s.ProcessesFromError(); err == nil || !strings.Contains(err.Error(), "gpu 9 out of range") {
		t.Errorf("ProcessesFromError = %v, want gpu 9 out of range", err)
	}

	// Removing the file removes its processes.
	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	if got := computePIDs(t, s, 0); got != "4242" {
		t.Errorf("after the file was removed, GPU 0 lists %q, want 4242", got)
	}
	if err := s.ProcessesFromError(); err != nil {
		t.Errorf("ProcessesFromError = %v after a good change", err)
	}
}

func TestProcessesFromBadFileAtStartIsAnError(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.yaml")
	writeAtomically(t, live, "processes:\n  - {gpu: 0, pid: 7, colour: red}\n")
	_, err := New(Config{Profile: "h100", ProcessesFrom: live})
	if err == nil || !strings.Contains(err.Error(), live) || !strings.Contains(err.Error(), `unknown key "colour"`) {
		t.Fatalf("New = %v, want an error naming %s and the unknown key", err, live)
	}
	writeAtomically(t, live, "processes:\n  - {gpu: 0, pid: 7, used_memory_bytes: 999999999999}\n")
	_, err = New(Config{Profile: "h100", ProcessesFrom: live})
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("New = %v, want an error naming line 2 and the memory that does not fit", err)
	}
}

// Collections read process lists from several goroutines while a workload
// rewrites the file (run under -race).
func TestProcessesFromConcurrentReadsAndRewrites(t *testing.T) {
	live := filepath.Join(t.TempDir(), "live.yaml")
	s := newSim(t, Config{Profile: "dgx-h100", Processes: []ProcessSpec{}, processesSet: true, ProcessesFrom: live})
	pid := strconv.Itoa(startSleeper(t).Process.Pid)
	done := make(chan struct{})
	errs := make(chan string, 4)
	gpus := []nvml.Device{handle(t, s, 0), handle(t, s, 1)}
	for g := range 4 {
		go func() {
			d := gpus[g%2]
			for {
				select {
				case <-done:
					errs <- ""
					return
				default:
				}
				procs, r := d.GetComputeRunningProcesses()
				if r != nvml.SUCCESS || len(procs) > 1 {
					errs <- fmt.Sprintf("GPU %d: %v %+v", g%2, r, procs)
					return
				}
				_, _ = d.GetMemoryInfo()
			}
		}()
	}
	for i := range 200 {
		writeAtomically(t, live, "processes:\n  - {gpu: "+strconv.Itoa(i%2)+", pid: "+pid+"}\n")
	}
	close(done)
	for range 4 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}

// A live process without a start has no utilization samples from before
// the file named it (a driver has none from before the process opened the
// GPU), and a rewrite of the file does not move its start.
func TestProcessesFromEntryStartsWhenTheFileNamesIt(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.yaml")
	// Every buffered sample, each with the time it was taken.
	s := newSim(t, Config{Profile: "h100", Processes: []ProcessSpec{}, ProcessesFrom: live, ProcessSamples: ProcessSamplesEveryPeriod})
	s.SetElapsed(10 * time.Second)
	p := startSleeper(t)
	pid := strconv.Itoa(p.Process.Pid)
	entry := "processes:\n  - {gpu: 0, pid: " + pid + ", sm_utilization: 0.5}\n"
	writeAtomically(t, live, entry)
	if got := computePIDs(t, s, 0); got != pid {
		t.Fatalf("GPU 0 lists %q, want %s", got, pid)
	}
	named := uint64(Epoch.Add(10 * time.Second).UnixMicro())
	oldest := func() uint64 {
		t.Helper()
		samples, r := handle(t, s, 0).GetProcessUtilization(0)
		if r != nvml.SUCCESS {
			t.Fatalf("GetProcessUtilization: %v", r)
		}
		first := samples[0].TimeStamp
		for _, x := range samples {
			first = min(first, x.TimeStamp)
		}
		return first
	}
	s.SetElapsed(11 * time.Second)
	if got := oldest(); got < named {
		t.Errorf("oldest sample at %d µs, before the file named the process at %d µs", got, named)
	}
	// Rewritten a second later (same PID): it still started at 10 s.
	s.SetElapsed(12 * time.Second)
	writeAtomically(t, live, entry+"  - {gpu: 0, pid: "+strconv.Itoa(os.Getpid())+"}\n")
	s.SetElapsed(13 * time.Second)
	if got := oldest(); got < named || got >= uint64(Epoch.Add(12*time.Second).UnixMicro()) {
		t.Errorf("after a rewrite, oldest sample at %d µs; want from %d µs (the first naming), inside the 10 s buffer", got, named)
	}
}
